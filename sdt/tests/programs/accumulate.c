/*
 * A sum computed in STEPS steps by THREADS threads, one breakpoint per step (level 1,
 * class 1, id 1, hits 1..STEPS): the same values whatever the thread count, up to
 * rounding. With INJECT_AT=K in the environment, step K adds 1 to total: a divergence
 * at hit K for `sdt compare`.
 *   usage: accumulate STEPS THREADS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <sdt.h>

#define PER_STEP 100000

double total;
long steps_done;
long checksum[4];

struct slice {
	long from, to;
	double sum;
};

static void *sum_slice(void *arg)
{
	struct slice *s = arg;
	for (long i = s->from; i < s->to; i++)
		s->sum += 1.0 / (double)(i + 1);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: accumulate STEPS THREADS\n");
		return 2;
	}
	int steps = atoi(argv[1]), threads = atoi(argv[2]);
	const char *inject = getenv("INJECT_AT");
	int inject_at = inject ? atoi(inject) : 0;
	pthread_t tids[64];
	struct slice slices[64];
	if (threads < 1 || threads > 64)
		return 2;
	for (int step = 1; step <= steps; step++) {
		long base = (long)(step - 1) * PER_STEP;
		for (int t = 0; t < threads; t++) {
			slices[t] = (struct slice){ base + PER_STEP * t / threads, base + PER_STEP * (t + 1) / threads, 0 };
			pthread_create(&tids[t], NULL, sum_slice, &slices[t]);
		}
		for (int t = 0; t < threads; t++) {
			pthread_join(tids[t], NULL);
			total += slices[t].sum;
		}
		if (step == inject_at)
			total += 1.0;
		steps_done = step;
		checksum[step % 4] += step;
		SetBreakpoint(1, 1, 1, 1, "");
	}
	printf("total %.17g after %ld steps\n", total, steps_done);
	return 0;
}
