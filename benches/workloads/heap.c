/*
 * Capture benchmark workload. THREADS threads share a HEAP_MB heap of random bytes
 * (incompressible: storage figures are not flattered). Each of SNAPSHOTS rounds, every
 * thread writes DIRTY_PCT percent of its slice of the heap (a contiguous run from a
 * random page, one word per page), and then, by SHAPE:
 *
 *   busy     (default) computes for GAP_MS; halfway through, while the workers are busy
 *            on their CPUs, the main thread reaches a breakpoint.
 *   barrier  waits at a barrier (asleep in futex) while the main thread waits GAP_MS
 *            and reaches a breakpoint.
 *
 * Either way about GAP_MS pass between a capture's end and the next breakpoint; with
 * GAP_MS = 0 the breakpoints come back to back (only the round's writes between them).
 *
 * It prints how long its rounds took ("rounds_ms N"), so that a run under sdt can be
 * compared with a run without it. With SNAPSHOTS = 0 it fills the heap, starts its
 * threads (which wait), prints "ready" and waits for SIGTERM: the same process for gdb's
 * gcore to dump.
 *
 *   usage: heap THREADS HEAP_MB DIRTY_PCT SNAPSHOTS [GAP_MS [busy|barrier]]
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sdt.h>

#define PAGE 4096

static unsigned char *heap;
static size_t pages;
static int nthreads, dirty_pct, snapshots, gap_ms = 100;
/* The workers wait at the barrier while the main thread breaks, instead of computing. */
static int barrier_shape;
static pthread_barrier_t round_start, round_end;
static atomic_int dirtied;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *parked(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&round_start);
	return NULL;
}

static void *worker(void *arg)
{
	long k = (long)arg;
	size_t first = pages * k / nthreads, last = pages * (k + 1) / nthreads;
	size_t span = last - first;
	size_t dirty = span * dirty_pct / 100;
	unsigned seed = 17 + k;
	volatile double sink = 0;
	for (int round = 0; round < snapshots; round++) {
		pthread_barrier_wait(&round_start);
		double start = now_ms();
		size_t at = span ? rand_r(&seed) % span : 0;
		for (size_t i = 0; i < dirty; i++) {
			size_t page = first + (at + i) % span;
			((unsigned long long *)(heap + page * PAGE))[round % 512] += round + 1;
		}
		atomic_fetch_add(&dirtied, 1);
		while (!barrier_shape && now_ms() - start < gap_ms)
			for (int i = 0; i < 1000; i++)
				sink += i * 0.5;
		pthread_barrier_wait(&round_end);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: heap THREADS HEAP_MB DIRTY_PCT SNAPSHOTS [GAP_MS [busy|barrier]]\n");
		return 2;
	}
	nthreads = atoi(argv[1]);
	pages = (size_t)atol(argv[2]) * 1024 * 1024 / PAGE;
	dirty_pct = atoi(argv[3]);
	snapshots = atoi(argv[4]);
	if (argc > 5)
		gap_ms = atoi(argv[5]);
	if (argc > 6 && strcmp(argv[6], "barrier") == 0)
		barrier_shape = 1;
	else if (argc > 6 && strcmp(argv[6], "busy") != 0) {
		fprintf(stderr, "heap: unknown shape %s (busy or barrier)\n", argv[6]);
		return 2;
	}
	heap = malloc(pages * PAGE);
	if (!heap)
		return 3;
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
		/* Workers with zero rounds wait at no barrier: park them on one instead. */
		pthread_barrier_init(&round_start, NULL, nthreads + 1);
		for (long k = 0; k < nthreads; k++) {
			pthread_t t;
			pthread_create(&t, NULL, parked, NULL);
		}
		printf("ready\n");
		fflush(stdout);
		sigwait(&set, &sig);
		return 0;
	}
	pthread_barrier_init(&round_start, NULL, nthreads + 1);
	pthread_barrier_init(&round_end, NULL, nthreads + 1);
	pthread_t *threads = calloc(nthreads, sizeof(*threads));
	for (long k = 0; k < nthreads; k++)
		pthread_create(&threads[k], NULL, worker, (void *)k);
	double start = now_ms();
	for (int round = 0; round < snapshots; round++) {
		pthread_barrier_wait(&round_start);
		while (atomic_load(&dirtied) < nthreads * (round + 1))
			usleep(100);
		usleep(gap_ms * 1000 / (barrier_shape ? 1 : 2));
		SetBreakpoint(1, 1, 1, 1, "bench=heap");
		pthread_barrier_wait(&round_end);
	}
	for (int k = 0; k < nthreads; k++)
		pthread_join(threads[k], NULL);
	printf("rounds_ms %.1f\n", now_ms() - start);
	return 0;
}
