/*
 * A ledger that worker threads update in rounds, for resuming and refining: with
 * `locked` every update holds a mutex and the run is deterministic; with `racy` the
 * updates are unlocked read-modify-writes of an amount that depends on the clock, so no
 * two runs end alike.
 *   usage: race locked|racy ROUNDS
 * Each round, the main thread releases the workers and waits for them, prints
 * "round R total T" (flushed) and passes breakpoint 1/1/R (level 1). Each worker passes
 * breakpoint 2/2/100+W (level 2, every arrival) after its share of a round. At the end:
 * "done total T".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sdt.h>

#define WORKERS 3
#define UPDATES 20000

long total;
long acct[8];
int round_no;
static int racy;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start, end;

static long amount(int w, int i)
{
	if (!racy)
		return 1 + (w + i) % 3;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return 1 + ts.tv_nsec % 3;
}

static void *work(void *arg)
{
	int w = (int)(long)arg;
	char attrs[32];
	snprintf(attrs, sizeof(attrs), "worker=%d", w);
	for (;;) {
		pthread_barrier_wait(&start);
		if (round_no < 0)
			return NULL;
		for (int i = 0; i < UPDATES; i++) {
			long a = amount(w, i);
			if (racy) {
				long t = total;
				acct[(i + w) % 8] += a;
				total = t + a;
			} else {
				pthread_mutex_lock(&lock);
				acct[(i + w) % 8] += a;
				total += a;
				pthread_mutex_unlock(&lock);
			}
		}
		SetBreakpoint(2, 2, 100 + w, 1, attrs);
		pthread_barrier_wait(&end);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "locked") && strcmp(argv[1], "racy"))) {
		fprintf(stderr, "usage: race locked|racy ROUNDS\n");
		return 2;
	}
	racy = !strcmp(argv[1], "racy");
	int rounds = atoi(argv[2]);
	pthread_t t[WORKERS];
	pthread_barrier_init(&start, NULL, WORKERS + 1);
	pthread_barrier_init(&end, NULL, WORKERS + 1);
	for (long w = 0; w < WORKERS; w++)
		pthread_create(&t[w], NULL, work, (void *)w);
	for (int r = 1; r <= rounds; r++) {
		round_no = r;
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&end);
		printf("round %d total %ld\n", r, total);
		fflush(stdout);
		SetBreakpoint(1, 1, r, 0, "phase=round");
	}
	round_no = -1;
	pthread_barrier_wait(&start);
	for (int w = 0; w < WORKERS; w++)
		pthread_join(t[w], NULL);
	printf("done total %ld\n", total);
	return 0;
}
