/*
 * THREADS threads, each in a loop: bump its marker, dirty some of a shared heap, reach a
 * breakpoint, and print the snapshot number it got with the marker it had, so that a
 * test can check, snapshot by snapshot, that the store holds what the program was told:
 *
 *   snap R thread T mark M      (R >= 0: snapshot R holds marks[T] == M)
 *   declined thread T           (the store could not take it: SDT_DECLINED)
 *
 * The first line is `pid P`. Lines are written whole with write(2) (no stdio buffer to
 * lose when the process is killed). With ITERATIONS 0 it runs until killed.
 *   usage: faults THREADS HEAP_MB ITERATIONS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sdt.h>

#define MAX_THREADS 64

volatile long marks[MAX_THREADS];
static unsigned char *heap;
static size_t heap_pages;
static long iterations;

static void say(const char *line)
{
	size_t len = strlen(line), done = 0;
	while (done < len) {
		ssize_t n = write(1, line + done, len - done);
		if (n <= 0)
			return;
		done += (size_t)n;
	}
}

static void *worker(void *arg)
{
	long t = (long)arg;
	unsigned long x = 0x9e3779b97f4a7c15UL * (unsigned long)(t + 1);
	for (long i = 0; iterations == 0 || i < iterations; i++) {
		long m = ++marks[t];
		/* A few hundred KiB of writes between breakpoints. */
		for (int k = 0; k < 64; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			heap[(x % heap_pages) * 4096 + (x >> 52)] = (unsigned char)m;
		}
		int r = SetBreakpoint(1, 1, 1, 1, "test=faults");
		char line[96];
		if (r >= 0)
			snprintf(line, sizeof line, "snap %d thread %ld mark %ld\n", r, t, m);
		else if (r == SDT_DECLINED)
			snprintf(line, sizeof line, "declined thread %ld\n", t);
		else
			line[0] = '\0';
		say(line);
		usleep(500);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: faults THREADS HEAP_MB ITERATIONS\n");
		return 2;
	}
	int threads = atoi(argv[1]);
	if (threads < 1 || threads > MAX_THREADS) {
		fprintf(stderr, "faults: 1 to %d threads\n", MAX_THREADS);
		return 2;
	}
	heap_pages = (size_t)atol(argv[2]) * 256;
	iterations = atol(argv[3]);
	char first[32];
	snprintf(first, sizeof first, "pid %d\n", (int)getpid());
	say(first);
	heap = malloc(heap_pages * 4096);
	for (size_t i = 0; i < heap_pages * 4096; i += 64)
		heap[i] = (unsigned char)i;
	pthread_t tids[MAX_THREADS];
	for (long t = 0; t < threads; t++)
		pthread_create(&tids[t], NULL, worker, (void *)t);
	for (int t = 0; t < threads; t++)
		pthread_join(tids[t], NULL);
	say("faults done\n");
	return 0;
}
