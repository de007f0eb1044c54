/*
 * Fills MB of heap, then, ROUNDS times, writes PCT percent of its pages (every
 * 100/PCT-th page, one byte) and reaches a breakpoint.
 *   usage: dirty MB PCT ROUNDS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sdt.h>

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: dirty MB PCT ROUNDS\n");
		return 2;
	}
	size_t pages = (size_t)atol(argv[1]) * 256;
	int pct = atoi(argv[2]), rounds = atoi(argv[3]);
	size_t step = pct > 0 ? 100 / pct : pages + 1;
	unsigned char *heap = malloc(pages * 4096);
	for (size_t i = 0; i < pages * 4096; i++)
		heap[i] = (unsigned char)(i * 7 + 1);
	for (int r = 0; r < rounds; r++) {
		for (size_t p = (size_t)r % step; p < pages; p += step)
			heap[p * 4096 + r] ^= 0x5a;
		SetBreakpoint(1, 1, 1, 1, "test=dirty");
	}
	printf("dirty done\n");
	return 0;
}
