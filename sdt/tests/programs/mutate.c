/*
 * Changes its memory in every way between snapshots, for checking that tracked captures
 * hold exactly what a full copy would: writes to the heap and to globals, grows the heap
 * with brk, maps, writes, unmaps, drops pages with MADV_DONTNEED, moves a mapping with
 * mremap, flips protections, and starts threads that write and exit. Deterministic: a
 * restored snapshot runs to the same "arena sum".
 *   usage: mutate ROUNDS
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <sdt.h>

#define PAGE 4096

static long counters[512];
static unsigned char *arena;
static size_t arena_len = 64 * PAGE;

static void *helper(void *arg)
{
	long k = (long)arg;
	unsigned char *scratch = malloc(3 * PAGE);
	memset(scratch, (int)k, 3 * PAGE);
	/* Bytes of its own (61 is odd, so the index is a bijection): the end is the same
	 * in every run, whatever the threads' timing. */
	for (int i = 0; i < 64; i++)
		arena[(size_t)(k * 64 + i) * 61 % arena_len] ^= (unsigned char)(i + k);
	free(scratch);
	return NULL;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 6;
	unsigned char *moving = NULL;
	size_t moving_len = 8 * PAGE;
	void *grown[64];
	int ngrown = 0;

	arena = mmap(NULL, arena_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (size_t i = 0; i < arena_len; i += 3)
		arena[i] = (unsigned char)i;
	SetBreakpoint(1, 1, 1, 1, "step=start");

	for (int r = 0; r < rounds; r++) {
		/* Globals and a few scattered heap pages. */
		for (int i = 0; i < 512; i += 7)
			counters[i] += r + i;
		for (int i = 0; i < 5; i++)
			arena[((r * 13 + i * 17) % 64) * PAGE + r] = (unsigned char)(0xa0 + r + i);
		SetBreakpoint(1, 1, 2, 1, "step=write");

		/* The heap grows through brk (small blocks stay below the mmap threshold). */
		if (ngrown < 64) {
			grown[ngrown] = malloc(20000);
			memset(grown[ngrown], 0x30 + r, 20000);
			ngrown++;
		}
		/* A fresh mapping, written, and an old one gone. */
		unsigned char *fresh = mmap(NULL, 16 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		memset(fresh + PAGE, 0x40 + r, 3 * PAGE);
		if (moving)
			munmap(moving, moving_len);
		moving = fresh;
		moving_len = 16 * PAGE;
		SetBreakpoint(1, 1, 3, 1, "step=map");

		/* Pages dropped: they read as zero now. */
		madvise(arena + (r % 8) * 8 * PAGE, 2 * PAGE, MADV_DONTNEED);
		/* A mapping moved elsewhere, and written at its new place. */
		unsigned char *moved = mremap(moving, moving_len, 2 * moving_len, MREMAP_MAYMOVE);
		if (moved != MAP_FAILED) {
			moving = moved;
			moving_len *= 2;
			moving[moving_len - PAGE] = (unsigned char)r;
		}
		SetBreakpoint(1, 1, 4, 1, "step=drop-and-move");

		/* Protection flips split and rejoin the arena's mapping. */
		mprotect(arena + 10 * PAGE, 4 * PAGE, PROT_READ);
		SetBreakpoint(1, 1, 5, 1, "step=readonly");
		mprotect(arena + 10 * PAGE, 4 * PAGE, PROT_READ | PROT_WRITE);
		arena[11 * PAGE + r] = 0x77;

		/* Threads: new stacks, writes, exits. */
		pthread_t t[3];
		for (long k = 0; k < 3; k++)
			pthread_create(&t[k], NULL, helper, (void *)(r * 3 + k));
		for (int k = 0; k < 3; k++)
			pthread_join(t[k], NULL);
		SetBreakpoint(1, 1, 6, 1, "step=threads");
	}
	uint64_t sum = 0;
	for (size_t i = 0; i < arena_len; i++)
		sum += arena[i];
	printf("mutate done: %d rounds, arena sum %lu\n", rounds, (unsigned long)sum);
	return 0;
}
