/*
 * paper.h - what the paper-evaluation workloads share: arguments, timing, the
 * self-check's report, and the benchmark's twenty breakpoints.
 *
 * Every workload is run as
 *
 *   NAME THREADS [small|default|large]
 *
 * and prints, on stdout:
 *
 *   workload NAME threads T size S     first
 *   roi_ms N                           the region of interest: the parallel computation,
 *                                      input generation and the self-check left out
 *   check: WHAT ... ok|FAILED          one line per self-check
 *   result: PASS|FAIL                  last; the exit code is 0 for PASS, 1 for FAIL
 *
 * Breakpoints. Each worker thread reports its progress through the computation, a
 * fraction from 0 to 1, with paper_progress(). The run is cut into twenty equal slots;
 * the first thread to enter slot j reaches breakpoint j (multiple_mark = 0, so only
 * that first arrival may capture):
 *
 *   slot 0  2  4 ... 18   ids 11-20, filtered out by capture.toml: ids 11, 13, ... at
 *                         level 3 (deeper than max_level, dropped inline), ids 12, 14, ...
 *                         at level 2 in class 2 (a class the config leaves out: checked
 *                         in the library, no system call)
 *   slot 1  3  5 ... 19   ids 1-10, level 1, class 1: pass capture.toml and capture
 *
 * so the ten snapshots fall at 5%, 15%, ..., 95% of the run, with a filtered breakpoint
 * between each two.
 *
 * gcore. With PAPER_GCORE=1 in the environment, the first thread to reach a capturing
 * breakpoint writes "gcore-point ID\n" on stdout and waits for a line on stdin; the
 * benchmark runs gdb's gcore on the process meanwhile (the other threads run on until gdb
 * stops them). That is gcore at the same ten points of the same workload.
 */
#ifndef PAPER_H
#define PAPER_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sdt.h>

#define PAPER_SLOTS 20

enum paper_size { PAPER_SMALL, PAPER_DEFAULT, PAPER_LARGE };

static const char *paper_size_names[] = { "small", "default", "large" };

/* Picks one of three values by size. */
#define PAPER_BY_SIZE(size, small, def, large) \
	((size) == PAPER_SMALL ? (small) : (size) == PAPER_DEFAULT ? (def) : (large))

static int paper_ok = 1;
static int paper_gcore = -1;
static atomic_int paper_slot_taken[PAPER_SLOTS];
static __thread int paper_next_slot;

static double paper_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Reads THREADS and SIZE, prints the first line; exits 2 on bad arguments. */
static void paper_args(int argc, char **argv, const char *name, int *threads, enum paper_size *size)
{
	*size = PAPER_DEFAULT;
	if (argc >= 3) {
		int found = 0;
		for (int s = PAPER_SMALL; s <= PAPER_LARGE; s++)
			if (strcmp(argv[2], paper_size_names[s]) == 0)
				*size = (enum paper_size)s, found = 1;
		if (!found)
			argc = 0;
	}
	*threads = argc >= 2 ? atoi(argv[1]) : 0;
	if (*threads < 1 || *threads > 256) {
		fprintf(stderr, "usage: %s THREADS [small|default|large]\n", name);
		exit(2);
	}
	const char *g = getenv("PAPER_GCORE");
	paper_gcore = g && strcmp(g, "1") == 0;
	printf("workload %s threads %d size %s\n", name, *threads, paper_size_names[*size]);
}

/* A deterministic generator (xorshift64*), one state per thread or per task. */
static inline double paper_uniform(unsigned long long *state)
{
	unsigned long long x = *state;
	x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
	*state = x;
	return ((x * 0x2545F4914F6CDD1DULL) >> 11) * (1.0 / 9007199254740992.0);
}

static inline unsigned long long paper_seed(unsigned long long n)
{
	unsigned long long z = n * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	return (z ^ (z >> 27)) | 1;
}

/* Runs fn((void *)0) ... fn((void *)(threads - 1)) on threads of their own, to the end. */
static void paper_parallel(int threads, void *(*fn)(void *))
{
	pthread_t tids[256];
	for (long t = 0; t < threads; t++)
		pthread_create(&tids[t], NULL, fn, (void *)t);
	for (int t = 0; t < threads; t++)
		pthread_join(tids[t], NULL);
}

/* paper_parallel() as the region of interest: prints "roi_ms N". */
static void paper_roi(int threads, void *(*fn)(void *))
{
	double start = paper_now_ms();
	paper_parallel(threads, fn);
	printf("roi_ms %.3f\n", paper_now_ms() - start);
}

/* One self-check line; a failed check fails the run. */
static void paper_check(int ok, const char *fmt, ...)
{
	va_list ap;
	printf("check: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" ... %s\n", ok ? "ok" : "FAILED");
	paper_ok &= ok;
}

/* The last line and the exit code. */
static int paper_finish(void)
{
	printf("result: %s\n", paper_ok ? "PASS" : "FAIL");
	return paper_ok ? 0 : 1;
}

static void paper_gcore_point(int id)
{
	char line[32];
	int n = snprintf(line, sizeof line, "gcore-point %d\n", id);
	char ack;
	fflush(stdout);
	if (write(1, line, n) != n || read(0, &ack, 1) != 1)
		fprintf(stderr, "paper: lost the gcore driver at point %d\n", id);
}

/*
 * The calling thread is `done` (0..1) of the way through its share of the run; reaches
 * the breakpoints of every slot it has entered since its last call (see the top of this
 * file). Cheap between slots: one comparison.
 */
static inline void paper_progress(double done, const char *phase)
{
	while (paper_next_slot < PAPER_SLOTS && done * PAPER_SLOTS >= paper_next_slot) {
		int j = paper_next_slot++;
		char attrs[64];
		snprintf(attrs, sizeof attrs, "phase=%s,at=%d%%", phase, j * 100 / PAPER_SLOTS);
		if (j % 2 == 1) {
			int id = 1 + j / 2;
			if (paper_gcore && atomic_exchange(&paper_slot_taken[j], 1) == 0)
				paper_gcore_point(id);
			(void)SetBreakpoint(1, 1, id, 0, attrs);
		} else if (j % 4 == 0) {
			(void)SetBreakpoint(3, 1, 11 + j / 2, 0, attrs);
		} else {
			(void)SetBreakpoint(2, 2, 11 + j / 2, 0, attrs);
		}
	}
}

/* Reaches the slots not reached yet (a thread that ran out of work early). */
static inline void paper_progress_end(const char *phase)
{
	paper_progress(1.0, phase);
}

#endif /* PAPER_H */
