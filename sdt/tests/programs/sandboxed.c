/*
 * A program that sandboxes itself as browsers and services do: once its threads are up,
 * a seccomp filter (on every thread) kills the whole process at any userfaultfd(2) or
 * rt_sigaction(2), calls it never makes again. Its threads write their part of an array
 * between breakpoints; at the end it raises SIGUSR1, whose handler it set before.
 *   usage: sandboxed [ROUNDS]
 * Prints "handled SIGUSR1" and the array's sum; exits 0.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sdt.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREADS 2
#define WORDS (4 << 20) /* 32 MiB of longs */

static long *array;
static int rounds;
static volatile sig_atomic_t handled;
static pthread_barrier_t start, done;

static void on_usr1(int sig)
{
	(void)sig;
	handled = 1;
}

static void *worker(void *arg)
{
	long part = (long)arg;
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&start);
		for (long i = part; i < WORDS; i += THREADS * 512) /* one word a page */
			array[i] += r + 1;
		pthread_barrier_wait(&done);
	}
	return NULL;
}

static void sandbox(void)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_userfaultfd, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigaction, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog)) {
		perror("seccomp");
		exit(2);
	}
}

int main(int argc, char **argv)
{
	rounds = argc > 1 ? atoi(argv[1]) : 4;
	array = calloc(WORDS, sizeof(long));
	signal(SIGUSR1, on_usr1);
	pthread_barrier_init(&start, NULL, THREADS + 1);
	pthread_barrier_init(&done, NULL, THREADS + 1);
	pthread_t threads[THREADS];
	for (long t = 0; t < THREADS; t++)
		pthread_create(&threads[t], NULL, worker, (void *)(t * 512));
	sandbox();
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		(void)SetBreakpoint(1, 1, 1, 1, "sandboxed");
	}
	for (long t = 0; t < THREADS; t++)
		pthread_join(threads[t], NULL);
	raise(SIGUSR1);
	long sum = 0;
	for (long i = 0; i < WORDS; i++)
		sum += array[i];
	printf("%s sum %ld\n", handled ? "handled SIGUSR1" : "SIGUSR1 not handled", sum);
	return 0;
}
