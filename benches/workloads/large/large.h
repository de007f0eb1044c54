/*
 * large.h - what the large-footprint workloads share: arguments, timing, threads and
 * the one result line.
 *
 * Every workload is run as
 *
 *   NAME THREADS [SIZE]
 *
 * (SIZE: the problem size, in the workload's own unit; its default is the full size) and
 * prints one line on stdout,
 *
 *   NAME: WHAT, T threads, footprint F MiB, S s, CHECK: ok|FAILED
 *
 * exiting 0 only for "ok". They carry no breakpoints: they are meant for timed snapshots
 * (`sdt run --every MS`), and each rewrites most of its footprint every few hundred
 * milliseconds, as scientific programs between checkpoints do.
 */
#ifndef LARGE_H
#define LARGE_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int nthreads;
static pthread_barrier_t barrier;
static double start_s;

static inline double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Reads THREADS and SIZE (default_size when absent); exits 2 on bad arguments. */
static inline long large_args(int argc, char **argv, long default_size, long min_size)
{
	nthreads = argc >= 2 ? atoi(argv[1]) : 0;
	long size = argc >= 3 ? atol(argv[2]) : default_size;
	if (argc > 3 || nthreads < 1 || nthreads > 256 || size < min_size) {
		fprintf(stderr, "usage: %s THREADS [SIZE >= %ld, default %ld]\n", argv[0], min_size,
			default_size);
		exit(2);
	}
	pthread_barrier_init(&barrier, NULL, nthreads);
	start_s = now_s();
	return size;
}

/* Rows [*lo, *hi) of `rows` that thread t owns: an equal band each. */
static inline void band(long rows, int t, long *lo, long *hi)
{
	*lo = rows * t / nthreads;
	*hi = rows * (t + 1) / nthreads;
}

/* Runs fn((void *)0) ... fn((void *)(nthreads - 1)) on threads of their own, to the end. */
static inline void run_threads(void *(*fn)(void *))
{
	pthread_t tids[256];
	for (long t = 0; t < nthreads; t++)
		if (pthread_create(&tids[t], NULL, fn, (void *)t) != 0) {
			perror("pthread_create");
			exit(2);
		}
	for (int t = 0; t < nthreads; t++)
		pthread_join(tids[t], NULL);
}

/* malloc that exits with a message instead of returning NULL. */
static inline void *xmalloc(size_t bytes)
{
	void *p = malloc(bytes);
	if (!p) {
		fprintf(stderr, "out of memory: %zu bytes\n", bytes);
		exit(2);
	}
	return p;
}

/* A hash of n (splitmix64's finalizer): the workloads' input, which the checks compute again. */
static inline unsigned long long mix64(unsigned long long n)
{
	unsigned long long z = n * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* mix64(n) as a double in [0, 1). */
static inline double hash01(unsigned long long n)
{
	return (mix64(n) >> 11) * (1.0 / 9007199254740992.0);
}

/* The result line (see the top of this file); returns the exit code. */
static inline int finish(const char *name, const char *what, double footprint_bytes, const char *check,
		  int ok)
{
	printf("%s: %s, %d threads, footprint %.0f MiB, %.2f s, %s: %s\n", name, what, nthreads,
	       footprint_bytes / (1 << 20), now_s() - start_s, check, ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}

#endif /* LARGE_H */
