/* An OpenMP program: three rounds of a parallel region in which each of three threads
 * passes a breakpoint, main adding to its local `total` after each; then a breakpoint
 * two calls below a function whose local `weight` the test asks for. The region's
 * threads run the function GCC outlines from it: its block is nested in main's, but the
 * threads other than main's have no frame of main. Prints `round R total T` after each
 * round and `weight W` at the end. */
#include <omp.h>
#include <stdio.h>

#include <sdt.h>

static void mark(void)
{
	SetBreakpoint(2, 1, 1, 1, "at=mark");
}

static void settle(int rounds)
{
	long weight = rounds * 100L;
	mark();
	printf("weight %ld\n", weight);
}

int main(void)
{
	long total = 0;
	for (int round = 1; round <= 3; round++) {
#pragma omp parallel num_threads(3)
		SetBreakpoint(1, 1, omp_get_thread_num(), 1, "at=region");
		total += round * 10;
		printf("round %d total %ld\n", round, total);
	}
	settle(3);
	return 0;
}
