/*
 * What write tracking costs a program on transparent huge pages. A 256 MiB heap,
 * madvised onto huge pages (as every program's heap is where
 * /sys/kernel/mm/transparent_hugepage/enabled says `always`), read and written at
 * random addresses in ROUNDS rounds of 4 million accesses, each round timed and followed
 * by a breakpoint (level 1, class 1, id 1). It prints how much of the heap is on huge
 * pages before the first round and after the last.
 *
 *   gcc -O2 -pthread -I sdt-lib/include benches/workloads/thp_split.c \
 *       target/release/libsdt.a -ldl -lm -o /tmp/thp_split
 *   /tmp/thp_split                                   # alone
 *   sdt run -q -- /tmp/thp_split                     # uffd-wp tracking
 *   sdt run -q --tracking page-hash -- /tmp/thp_split
 *
 *   usage: thp_split [HUGE (1: madvise the heap onto huge pages; 0: not)] [ROUNDS]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <sdt.h>

#define HEAP ((size_t)256 << 20)
#define HUGE_PAGE ((size_t)2 << 20)
#define ACCESSES 4000000L

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* This process's AnonHugePages, in MiB (-1 if unknown). */
static long huge_mib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib < 0 ? -1 : kib >> 10;
}

int main(int argc, char **argv)
{
	int huge = argc > 1 ? atoi(argv[1]) : 1;
	int rounds = argc > 2 ? atoi(argv[2]) : 12;
	char *map = mmap(NULL, HEAP + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	/* Aligned to a huge page, so that every one of them can be one. */
	char *heap = (char *)(((unsigned long)map + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
	if (huge)
		madvise(heap, HEAP, MADV_HUGEPAGE);
	memset(heap, 1, HEAP);
	printf("huge pages at start: %ld MiB of %zu\n", huge_mib(), HEAP >> 20);
	unsigned long x = 88172645463325252ull, sum = 0;
	double total = 0;
	for (int r = 0; r < rounds; r++) {
		double start = now_ms();
		for (long i = 0; i < ACCESSES; i++) {
			/* xorshift64: an address the hardware cannot guess. */
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			size_t at = x % (HEAP / 8) * 8;
			sum += heap[at];
			heap[at] = (char)sum;
		}
		double took = now_ms() - start;
		total += took;
		printf("round %d: %.1f ms\n", r, took);
		SetBreakpoint(1, 1, 1, 1, "bench=thp_split");
	}
	printf("huge pages at end: %ld MiB\nrounds_ms %.1f\nchecksum %lu\n", huge_mib(), total, sum);
	return 0;
}
