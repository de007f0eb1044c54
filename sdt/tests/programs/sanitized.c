/*
 * A program for the sanitizers users hunt races with (built with -fsanitize=address or
 * -fsanitize=thread, each of which reserves terabytes of shadow memory): THREADS threads
 * each fill their own slice of a 16 MiB heap block, ROUNDS times, and the main thread
 * breaks after each round with `rounds` counting them. It leaves a block unfreed, which
 * LeakSanitizer would report (exit 23) were its check to run. Prints "sum N" at the end.
 *   usage: sanitized THREADS ROUNDS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <sdt.h>

#define WORDS (2 << 20)

static long *block;
static int nthreads;
int rounds;

static void *fill(void *arg)
{
	long id = (long)arg;
	long per = WORDS / nthreads;
	for (long i = id * per; i < (id + 1) * per; i++)
		block[i] += i + rounds;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: sanitized THREADS ROUNDS\n");
		return 2;
	}
	nthreads = atoi(argv[1]);
	int total = atoi(argv[2]);
	block = calloc(WORDS, sizeof(long));
	long *leaked = malloc(4096);
	leaked[0] = 1;
	leaked = NULL;
	pthread_t threads[64];
	for (rounds = 0; rounds < total;) {
		for (long t = 0; t < nthreads; t++)
			pthread_create(&threads[t], NULL, fill, (void *)t);
		for (long t = 0; t < nthreads; t++)
			pthread_join(threads[t], NULL);
		rounds++;
		SetBreakpoint(1, 1, 1, 1, "at=round");
	}
	long sum = 0;
	for (long i = 0; i < WORDS; i++)
		sum += block[i];
	printf("sum %ld\n", sum);
	free(block);
	return 0;
}
