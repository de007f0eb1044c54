/*
 * Overhead benchmark workload: THREADS threads compute (a numeric kernel over a private
 * array) for ITERATIONS iterations each, passing SetBreakpoint at two densities: once
 * per iteration (level 2) and once per inner block (level 3, about a million times a
 * second per thread). Prints its own running time, "run_ms N".
 *
 *   usage: annotated THREADS ITERATIONS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <sdt.h>

#define N 4096

static long iterations;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *work(void *arg)
{
	double *a = malloc(N * sizeof(double));
	double sum = 0;
	for (int i = 0; i < N; i++)
		a[i] = (double)(i + (long)arg);
	for (long it = 0; it < iterations; it++) {
		SetBreakpoint(2, 1, 1, 1, "phase=iteration");
		for (int block = 0; block < N; block += 64) {
			SetBreakpoint(3, 1, 2, 1, "phase=block");
			for (int i = block; i < block + 64; i++) {
				a[i] = a[i] * 0.999 + 0.5;
				sum += a[i];
			}
		}
	}
	free(a);
	return (void *)(long)(sum > 0);
}

int main(int argc, char **argv)
{
	int nthreads = argc > 1 ? atoi(argv[1]) : 4;
	iterations = argc > 2 ? atol(argv[2]) : 20000;
	pthread_t *t = calloc(nthreads, sizeof(*t));
	double start = now_ms();
	for (long k = 0; k < nthreads; k++)
		pthread_create(&t[k], NULL, work, (void *)k);
	for (int k = 0; k < nthreads; k++)
		pthread_join(t[k], NULL);
	printf("run_ms %.1f\n", now_ms() - start);
	return 0;
}
