/*
 * No SetBreakpoint at all: four threads call two functions 1000 times each, for
 * `sdt run --break FUNC`. step() starts with `push %rbp` (built -O0), which the tracer
 * emulates; twice() is built -O2 and starts with an instruction it does not, so it is
 * stepped with every other thread stopped. Deterministic: prints "sum S calls C".
 *   usage: symbols
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#define THREADS 4
#define CALLS 1000

static atomic_long calls;

__attribute__((noinline)) long step(long x)
{
	atomic_fetch_add(&calls, 1);
	return x % 7;
}

__attribute__((noinline, optimize("O2"))) long twice(long x)
{
	return 2 * x + (x >> 3);
}

static long sums[THREADS];

static void *work(void *arg)
{
	long w = (long)arg;
	for (long i = 0; i < CALLS; i++)
		sums[w] += step(i + w) + twice(i);
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	for (long w = 0; w < THREADS; w++)
		pthread_create(&t[w], NULL, work, (void *)w);
	long sum = 0;
	for (int w = 0; w < THREADS; w++) {
		pthread_join(t[w], NULL);
		sum += sums[w];
	}
	printf("sum %ld calls %ld\n", sum, atomic_load(&calls));
	return 0;
}
