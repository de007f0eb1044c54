/*
 * Threads are created and exit all the time while others hit breakpoints:
 *   usage: churn ROUNDS
 * Each round starts 6 short-lived threads that write to shared memory and exit, while
 * 2 long-lived threads hit a multiple_mark=1 breakpoint.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sdt.h>

#define SHORT_LIVED 6

static long shared[4096];
static volatile int rounds_left;

static void *short_lived(void *arg)
{
	long k = (long)arg;
	for (int i = 0; i < 512; i++)
		shared[(k * 512 + i) % 4096] += k + i;
	return NULL;
}

static void *long_lived(void *arg)
{
	long k = (long)arg;
	int hits = 0;
	while (rounds_left > 0) {
		shared[k]++;
		if (SetBreakpoint(1, 1, 1, 1, "test=churn") >= 0)
			hits++;
		for (volatile int spin = 0; spin < 20000; spin++)
			;
	}
	return (void *)(long)hits;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 50;
	pthread_t keep[2];
	rounds_left = rounds;
	for (long k = 0; k < 2; k++)
		pthread_create(&keep[k], NULL, long_lived, (void *)k);
	for (int r = 0; r < rounds; r++) {
		pthread_t t[SHORT_LIVED];
		for (long k = 0; k < SHORT_LIVED; k++)
			pthread_create(&t[k], NULL, short_lived, (void *)(r * SHORT_LIVED + k));
		for (int k = 0; k < SHORT_LIVED; k++)
			pthread_join(t[k], NULL);
	}
	rounds_left = 0;
	long hits = 0;
	for (int k = 0; k < 2; k++) {
		void *h;
		pthread_join(keep[k], &h);
		hits += (long)h;
	}
	long sum = 0;
	for (int i = 0; i < 4096; i++)
		sum += shared[i];
	printf("churn done: %d rounds, %ld captures, checksum %ld\n", rounds, hits, sum);
	return 0;
}
