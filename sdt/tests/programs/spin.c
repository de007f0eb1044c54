/* Computes for about MS milliseconds (default 400) with no breakpoints at all, holding
 * MB of heap (default none) it fills first: `spin [MS [MB]]`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	double ms = argc > 1 ? atof(argv[1]) : 400;
	size_t heap = argc > 2 ? (size_t)atol(argv[2]) << 20 : 0;
	char *held = heap ? malloc(heap) : NULL;
	if (heap && !held)
		return 1;
	if (held)
		memset(held, 1, heap);
	double start = now_ms();
	volatile unsigned long x = 0;
	while (now_ms() - start < ms)
		for (int i = 0; i < 10000; i++)
			x += i;
	printf("spun %.0f ms\n", now_ms() - start);
	free(held);
	return 0;
}
