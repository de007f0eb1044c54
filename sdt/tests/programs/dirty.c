/*
 * Fills MB of heap, then, ROUNDS times, writes PCT percent of its pages (every
 * 100/PCT-th page, one byte) and reaches a breakpoint. With `drop`, the heap's pages
 * are dropped (MADV_DONTNEED) after each round's writes, before its breakpoint.
 *   usage: dirty MB PCT ROUNDS [drop]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <sdt.h>

int main(int argc, char **argv)
{
	if (argc != 4 && !(argc == 5 && strcmp(argv[4], "drop") == 0)) {
		fprintf(stderr, "usage: dirty MB PCT ROUNDS [drop]\n");
		return 2;
	}
	size_t pages = (size_t)atol(argv[1]) * 256;
	int pct = atoi(argv[2]), rounds = atoi(argv[3]), drop = argc == 5;
	size_t step = pct > 0 ? 100 / pct : pages + 1;
	unsigned char *heap = malloc(pages * 4096);
	for (size_t i = 0; i < pages * 4096; i++)
		heap[i] = (unsigned char)(i * 7 + 1);
	/* The whole pages inside the heap. */
	uintptr_t first = ((uintptr_t)heap + 4095) & ~(uintptr_t)4095;
	uintptr_t end = ((uintptr_t)heap + pages * 4096) & ~(uintptr_t)4095;
	for (int r = 0; r < rounds; r++) {
		for (size_t p = (size_t)r % step; p < pages; p += step)
			heap[p * 4096 + r] ^= 0x5a;
		if (drop && madvise((void *)first, end - first, MADV_DONTNEED) != 0) {
			perror("madvise");
			return 1;
		}
		SetBreakpoint(1, 1, 1, 1, "test=dirty");
	}
	printf("dirty done\n");
	return 0;
}
