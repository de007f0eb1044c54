/*
 * A program that makes itself non-dumpable between two breakpoints, as programs holding
 * secrets do: breakpoint 1, prctl(PR_SET_DUMPABLE, 0), 300 ms of work, breakpoint 2.
 * Prints "value V result R" (R: what breakpoint 2's SetBreakpoint returned).
 *   usage: undumpable
 */
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>

#include "sdt.h"

static volatile long value = 1;

int main(void)
{
	SetBreakpoint(1, 0, 1, 0, "");
	if (prctl(PR_SET_DUMPABLE, 0) != 0) {
		perror("prctl");
		return 1;
	}
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		value++;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < 300);
	int result = SetBreakpoint(1, 0, 2, 0, "");
	printf("value %s result %d\n", value > 1 ? "grew" : "stuck", result);
	return 0;
}
