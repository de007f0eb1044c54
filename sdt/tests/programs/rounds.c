/*
 * A deterministic multithreaded computation whose progress goes to stdout, for CRIU to
 * restore from an exported snapshot (QEMU guest, `criu_export.rs`): the restored
 * process must print exactly what the original printed from the snapshot on.
 *
 * Four workers each fold a value through a mixing function, ROUNDS rounds, meeting the
 * main thread at a barrier twice a round. A fifth thread sleeps in nanosleep() until the
 * end, so that a snapshot holds threads in user code, in futex waits and in a sleep.
 * At round BP_ROUND (while the workers compute) the main thread passes breakpoint
 * 1/1/1 and prints the snapshot number it returned; at round BP_ROUND + 3 it passes
 * breakpoint 1/1/2, whose result it does not print (a restored process is not traced).
 * Each round's line is written with one write(2) after the round, so the output file
 * always ends with a whole line. It first closes every descriptor but stdio, so that it
 * holds nothing the images cannot express whatever its environment leaked to it. With
 * PAUSE_MS, it sleeps that long after its first line, before the first round (a time for
 * a timed snapshot to fall in).
 *   usage: rounds ROUNDS BP_ROUND [PAUSE_MS]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sdt.h>

#define WORKERS 4

static pthread_barrier_t round_start, round_end;
static uint64_t values[WORKERS];
static unsigned long rounds;
static volatile int finished;
static unsigned long sleeps;

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static void *worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	for (unsigned long r = 0; r < rounds; r++) {
		pthread_barrier_wait(&round_start);
		uint64_t v = values[me];
		/* Uneven work, so that some workers still compute while others wait. */
		for (unsigned long i = 0; i < 20000UL * (me + 1); i++)
			v = mix(v + i + r);
		values[me] = v;
		pthread_barrier_wait(&round_end);
	}
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	struct timespec tick = { 0, 20 * 1000 * 1000 };
	while (!finished) {
		/* An interrupted sleep (EINTR) just ends early. */
		nanosleep(&tick, NULL);
		sleeps++;
	}
	return NULL;
}

static void say(const char *line)
{
	size_t len = strlen(line);
	if (write(1, line, len) != (ssize_t)len) {
		perror("write");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: rounds ROUNDS BP_ROUND [PAUSE_MS]\n");
		return 2;
	}
	close_range(3, ~0U, 0);
	rounds = strtoul(argv[1], NULL, 10);
	unsigned long bp_round = strtoul(argv[2], NULL, 10);
	unsigned long pause_ms = argc > 3 ? strtoul(argv[3], NULL, 10) : 0;
	pthread_barrier_init(&round_start, NULL, WORKERS + 1);
	pthread_barrier_init(&round_end, NULL, WORKERS + 1);
	for (int i = 0; i < WORKERS; i++)
		values[i] = 1000 + i;
	pthread_t threads[WORKERS], sleeping;
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&threads[i], NULL, worker, (void *)(intptr_t)i);
	pthread_create(&sleeping, NULL, sleeper, NULL);

	char line[256];
	snprintf(line, sizeof(line), "rounds %lu, breakpoint at round %lu\n", rounds, bp_round);
	say(line);
	struct timespec pause = { pause_ms / 1000, (pause_ms % 1000) * 1000 * 1000 };
	nanosleep(&pause, NULL); /* interrupted (EINTR): the pause just ends early */
	for (unsigned long r = 0; r < rounds; r++) {
		pthread_barrier_wait(&round_start);
		int snapshot = SDT_OFF;
		if (r == bp_round)
			snapshot = SetBreakpoint(1, 1, 1, 0, "test=rounds");
		if (r == bp_round + 3)
			(void)SetBreakpoint(1, 1, 2, 0, "test=rounds-later");
		pthread_barrier_wait(&round_end);
		uint64_t sum = 0;
		int n = snprintf(line, sizeof(line), "round %lu:", r);
		for (int i = 0; i < WORKERS; i++) {
			n += snprintf(line + n, sizeof(line) - n, " %016llx", (unsigned long long)values[i]);
			sum += values[i];
		}
		if (r == bp_round)
			n += snprintf(line + n, sizeof(line) - n, " (snapshot %d)", snapshot);
		snprintf(line + n, sizeof(line) - n, " sum %016llx\n", (unsigned long long)sum);
		say(line);
	}
	finished = 1;
	for (int i = 0; i < WORKERS; i++)
		pthread_join(threads[i], NULL);
	pthread_join(sleeping, NULL);
	say("done\n");
	return 0;
}
