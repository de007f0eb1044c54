/*
 * Many breakpoints from many threads while other threads come and go: the kernel
 * module's stress test (and the program the guest kills mid-capture).
 *   usage: kmodstress WORKERS TRIGGERS [PIDFILE]
 * WORKERS threads share TRIGGERS breakpoints (1/1/1, multiple_mark 1) between them,
 * writing to shared memory between two; meanwhile a churner creates and joins
 * short-lived threads without pause. With PIDFILE, the pid is written there first.
 * At the end it prints what the breakpoints returned:
 *   kmodstress done: triggers=N captured=N distinct=N declined=N off=N other=N churned=N
 * `distinct` counts different snapshot numbers: every capture must return its own.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sdt.h>

#define MAX_SNAPSHOTS (1 << 20)

static int workers, triggers;
static atomic_int next_trigger, captured, declined, off, other, churned;
static atomic_int running = 1;
static unsigned char seen[MAX_SNAPSHOTS];
static volatile long shared[1024];

static void *worker(void *arg)
{
	long k = (long)arg;

	while (atomic_fetch_add(&next_trigger, 1) < triggers) {
		int n;

		for (int i = 0; i < 64; i++)
			shared[(k * 64 + i) % 1024] += k + i;
		n = SetBreakpoint(1, 1, 1, 1, "test=kmodstress");
		if (n >= 0 && n < MAX_SNAPSHOTS) {
			atomic_fetch_add(&captured, 1);
			__atomic_store_n(&seen[n], 1, __ATOMIC_RELAXED);
		} else if (n == SDT_DECLINED) {
			atomic_fetch_add(&declined, 1);
		} else if (n == SDT_OFF) {
			atomic_fetch_add(&off, 1);
		} else {
			atomic_fetch_add(&other, 1);
		}
	}
	return NULL;
}

static void *short_lived(void *arg)
{
	long k = (long)arg;

	for (int i = 0; i < 256; i++)
		shared[(k + i) % 1024] ^= i;
	return NULL;
}

static void *churner(void *arg)
{
	(void)arg;
	for (long k = 0; atomic_load(&running); k++) {
		pthread_t t[2];

		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, short_lived, (void *)k);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		atomic_fetch_add(&churned, 2);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t *threads, churn;
	int distinct = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: kmodstress WORKERS TRIGGERS [PIDFILE]\n");
		return 2;
	}
	workers = atoi(argv[1]);
	triggers = atoi(argv[2]);
	if (argc > 3) {
		FILE *f = fopen(argv[3], "w");

		if (!f)
			return 3;
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
	threads = calloc(workers, sizeof(*threads));
	pthread_create(&churn, NULL, churner, NULL);
	for (long k = 0; k < workers; k++)
		pthread_create(&threads[k], NULL, worker, (void *)k);
	for (int k = 0; k < workers; k++)
		pthread_join(threads[k], NULL);
	atomic_store(&running, 0);
	pthread_join(churn, NULL);
	for (int n = 0; n < MAX_SNAPSHOTS; n++)
		distinct += seen[n];
	printf("kmodstress done: triggers=%d captured=%d distinct=%d declined=%d off=%d other=%d churned=%d\n",
	       triggers, atomic_load(&captured), distinct, atomic_load(&declined), atomic_load(&off),
	       atomic_load(&other), atomic_load(&churned));
	return 0;
}
