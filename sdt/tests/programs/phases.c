/*
 * Rewrites an array of 8 MiB (four 2 MiB chunks, aligned) in phases, one breakpoint per
 * round: the pattern SDT leaves chunks writable for, and every way of leaving it.
 *
 *   dense   every page, three rounds     (chunks measured dense, then left writable)
 *   sparse  one page in 64, two rounds   (the sample sees it: re-armed)
 *   quiet   nothing, three rounds        (nothing left to copy by the last)
 *   dense   every page, two rounds       (left again)
 *   half    the first half of each chunk, two rounds
 *   quiet   one round
 *
 * Each round writes its own byte into the pages it touches, so that a snapshot that
 * missed a write, or kept a stale page, differs from the live memory.
 *   usage: phases
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sdt.h>

#define MB (1024 * 1024)
#define PAGE 4096
#define CHUNK (2 * MB)
#define BYTES (8 * MB)

static unsigned char *array;

/* Writes `round` into every `step`-th page of each chunk's first `part` bytes. */
static void write_pages(int round, size_t step, size_t part)
{
	for (size_t chunk = 0; chunk < BYTES; chunk += CHUNK)
		for (size_t page = 0; page < part; page += step * PAGE)
			memset(array + chunk + page + (size_t)round * 8, round, 8);
}

int main(void)
{
	if (posix_memalign((void **)&array, CHUNK, BYTES) != 0)
		return 1;
	memset(array, 0xee, BYTES);
	static const struct {
		const char *phase;
		size_t step, part;
	} rounds[] = {
		{ "dense", 1, CHUNK },	   { "dense", 1, CHUNK },     { "dense", 1, CHUNK },
		{ "sparse", 64, CHUNK },   { "sparse", 64, CHUNK },   { "quiet", 0, 0 },
		{ "quiet", 0, 0 },	   { "quiet", 0, 0 },	      { "dense", 1, CHUNK },
		{ "dense", 1, CHUNK },	   { "half", 1, CHUNK / 2 },  { "half", 1, CHUNK / 2 },
		{ "quiet", 0, 0 },
	};
	int n = (int)(sizeof rounds / sizeof rounds[0]);
	for (int r = 0; r < n; r++) {
		if (rounds[r].step > 0)
			write_pages(r + 1, rounds[r].step, rounds[r].part);
		char attrs[32];
		snprintf(attrs, sizeof attrs, "phase=%s", rounds[r].phase);
		SetBreakpoint(1, 1, 1, 1, attrs);
	}
	printf("phases done: %d rounds\n", n);
	return 0;
}
