/*
 * A program started without sdt, for `sdt attach`: four workers count in rounds of about
 * 10 ms, each passing a breakpoint a round, until ROUNDS rounds are done. Outside
 * `sdt run` a breakpoint returns SDT_OFF, attached to or not: any other answer is
 * counted. Prints "ready" once every worker has run a round, then "done T, breakpoints
 * off" (T: the counts' total, 4 × ROUNDS × 100000) or "breakpoint returned N". `magic`
 * is 0x5d7 from the start. With "crash", main dereferences a null pointer once the
 * workers are half way.
 *   usage: attached ROUNDS [crash]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sdt.h>

#define WORKERS 4

long magic = 0x5d7;
static long rounds;
static volatile long counts[WORKERS];
static atomic_long started, other_answers, last_answer;
static int *volatile nowhere;

static void *work(void *arg)
{
	long i = (long)arg;
	for (long r = 0; r < rounds; r++) {
		for (long k = 0; k < 100000; k++)
			counts[i]++;
		long answer = SetBreakpoint(1, 1, 1, 1, "phase=round");
		if (answer != SDT_OFF) {
			atomic_fetch_add(&other_answers, 1);
			atomic_store(&last_answer, answer);
		}
		if (r == 0)
			atomic_fetch_add(&started, 1);
		usleep(10 * 1000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: attached ROUNDS [crash]\n");
		return 2;
	}
	rounds = atol(argv[1]);
	int crash = argc > 2 && strcmp(argv[2], "crash") == 0;
	pthread_t t[WORKERS];
	for (long i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, work, (void *)i);
	while (atomic_load(&started) < WORKERS)
		usleep(1000);
	printf("ready\n");
	fflush(stdout);
	if (crash) {
		while (counts[0] < rounds * 100000 / 2)
			usleep(1000);
		*nowhere = 1;
	}
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	long total = 0;
	for (int i = 0; i < WORKERS; i++)
		total += counts[i];
	if (atomic_load(&other_answers) > 0)
		printf("breakpoint returned %ld\n", atomic_load(&last_answer));
	else
		printf("done %ld, breakpoints off\n", total);
	return 0;
}
