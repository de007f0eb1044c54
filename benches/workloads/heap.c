/*
 * Capture benchmark workload: THREADS threads share a HEAP_MB heap, filled with
 * random data; between snapshots each writes DIRTY_PCT percent of its pages; the main
 * thread then reaches a breakpoint. With SNAPSHOTS = 0 it fills the heap, prints
 * "ready", and waits for SIGTERM (for gdb's gcore to dump it).
 *
 *   usage: heap THREADS HEAP_MB DIRTY_PCT SNAPSHOTS
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sdt.h>

#define PAGE 4096

static unsigned char *heap;
static size_t pages;
static int nthreads, dirty_pct, snapshots;
static pthread_barrier_t start_round, end_round;

static void *worker(void *arg)
{
	long k = (long)arg;
	size_t first = pages * k / nthreads, last = pages * (k + 1) / nthreads;
	size_t span = last - first;
	size_t dirty = span * dirty_pct / 100;
	unsigned seed = 17 + k;
	for (int round = 0; round < snapshots; round++) {
		pthread_barrier_wait(&start_round);
		/* Dirty a contiguous run starting at a random page, as arrays do. */
		size_t at = span ? rand_r(&seed) % span : 0;
		for (size_t i = 0; i < dirty; i++) {
			size_t page = first + (at + i) % span;
			heap[page * PAGE + (round * 64) % PAGE] += 1 + round;
		}
		pthread_barrier_wait(&end_round);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: heap THREADS HEAP_MB DIRTY_PCT SNAPSHOTS\n");
		return 2;
	}
	nthreads = atoi(argv[1]);
	pages = (size_t)atol(argv[2]) * 1024 * 1024 / PAGE;
	dirty_pct = atoi(argv[3]);
	snapshots = atoi(argv[4]);
	heap = malloc(pages * PAGE);
	if (!heap)
		return 3;
	/* Random bytes: the worst case for compression, so storage figures are honest. */
	unsigned long long x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < pages * PAGE / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		((unsigned long long *)heap)[i] = x;
	}
	if (snapshots == 0) {
		sigset_t set;
		int sig;
		sigemptyset(&set);
		sigaddset(&set, SIGTERM);
		sigprocmask(SIG_BLOCK, &set, NULL);
		printf("ready\n");
		fflush(stdout);
		sigwait(&set, &sig);
		return 0;
	}
	pthread_barrier_init(&start_round, NULL, nthreads + 1);
	pthread_barrier_init(&end_round, NULL, nthreads + 1);
	pthread_t *threads = calloc(nthreads, sizeof(*threads));
	for (long k = 0; k < nthreads; k++)
		pthread_create(&threads[k], NULL, worker, (void *)k);
	SetBreakpoint(1, 1, 1, 1, "round=0");
	for (int round = 0; round < snapshots - 1; round++) {
		pthread_barrier_wait(&start_round);
		pthread_barrier_wait(&end_round);
		SetBreakpoint(1, 1, 1, 1, "round=next");
	}
	/* Release the workers' last round. */
	pthread_barrier_wait(&start_round);
	pthread_barrier_wait(&end_round);
	for (int k = 0; k < nthreads; k++)
		pthread_join(threads[k], NULL);
	return 0;
}
