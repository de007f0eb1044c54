/* Threads in every state when a snapshot is taken, and values gdb must show. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <sdt.h>

long counter_global = 0;
int arr[16];
char message[64] = "hello from states";
struct point {
	int x;
	int y;
} origin = { 3, 4 };
__thread int tls_value;

static int pipe_fds[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static volatile int released;
static volatile int stop_spinning;
static pthread_barrier_t started;
static pid_t blocker_tids[3];

static void *worker_spin(void *arg)
{
	(void)arg;
	tls_value = 101;
	pthread_barrier_wait(&started);
	volatile unsigned long spins = 0;
	while (!stop_spinning)
		spins++;
	return NULL;
}

static void *worker_read(void *arg)
{
	(void)arg;
	tls_value = 102;
	blocker_tids[0] = syscall(SYS_gettid);
	pthread_barrier_wait(&started);
	char byte;
	if (read(pipe_fds[0], &byte, 1) != 1)
		perror("read");
	return NULL;
}

static void wake(int sig)
{
	(void)sig;
}

/* Sleeps in nanosleep(2) until main's SIGUSR2 ends it: never between two sleeps when a
   capture comes, however late the scheduler lets it run. */
static void *worker_sleep(void *arg)
{
	(void)arg;
	tls_value = 103;
	blocker_tids[1] = syscall(SYS_gettid);
	pthread_barrier_wait(&started);
	struct timespec ts = { 3600, 0 };
	while (!released)
		nanosleep(&ts, NULL);
	return NULL;
}

static void *worker_wait(void *arg)
{
	(void)arg;
	tls_value = 104;
	blocker_tids[2] = syscall(SYS_gettid);
	pthread_barrier_wait(&started);
	pthread_mutex_lock(&lock);
	while (!released)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* Waits until every blocking worker sleeps in its system call (state S). */
static void wait_until_blocked(void)
{
	for (int tries = 0; tries < 5000; tries++) {
		int sleeping = 0;
		for (int i = 0; i < 3; i++) {
			char path[64], stat[256];
			snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)blocker_tids[i]);
			FILE *f = fopen(path, "r");
			if (f && fgets(stat, sizeof(stat), f)) {
				char *state = strrchr(stat, ')');
				sleeping += state && state[2] == 'S';
			}
			if (f)
				fclose(f);
		}
		if (sleeping == 3)
			return;
		usleep(1000);
	}
	fprintf(stderr, "workers did not block\n");
}

static void report(int snapshot_id)
{
	printf("bp %d: counter_global=%ld arr[5]=%d message=%s origin=%d,%d\n", snapshot_id,
	       counter_global, arr[5], message, origin.x, origin.y);
	fflush(stdout);
	int r = SetBreakpoint(1, 1, snapshot_id, 0, "test=states");
	printf("bp %d: result %d\n", snapshot_id, r);
	fflush(stdout);
}

int main(void)
{
	pthread_t threads[4];
	void *(*bodies[4])(void *) = { worker_spin, worker_read, worker_sleep, worker_wait };

	tls_value = 100;
	signal(SIGUSR2, wake);
	if (pipe(pipe_fds) != 0)
		return 2;
	pthread_barrier_init(&started, NULL, 5);
	for (int i = 0; i < 4; i++)
		pthread_create(&threads[i], NULL, bodies[i], NULL);
	pthread_barrier_wait(&started);
	wait_until_blocked();

	counter_global = 42;
	for (int i = 0; i < 16; i++)
		arr[i] = i * i;
	report(1);

	wait_until_blocked();
	counter_global = 4242;
	arr[5] = -7;
	strcpy(message, "changed between snapshots");
	origin.y = 40;
	report(2);

	stop_spinning = 1;
	if (write(pipe_fds[1], "x", 1) != 1)
		return 3;
	pthread_mutex_lock(&lock);
	released = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	/* Until the sleeper has seen `released`: a signal that came before its nanosleep
	   would not end that sleep. */
	struct timespec soon;
	do {
		pthread_kill(threads[2], SIGUSR2);
		clock_gettime(CLOCK_REALTIME, &soon);
		soon.tv_nsec += 10 * 1000 * 1000;
		if (soon.tv_nsec >= 1000 * 1000 * 1000) {
			soon.tv_sec++;
			soon.tv_nsec -= 1000 * 1000 * 1000;
		}
	} while (pthread_timedjoin_np(threads[2], NULL, &soon) != 0);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			pthread_join(threads[i], NULL);
	printf("done: tls_value=%d\n", tls_value);
	return 0;
}
