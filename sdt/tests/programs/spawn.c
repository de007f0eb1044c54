/*
 * Threads created and joined one after another while a ticker thread passes a breakpoint
 * every millisecond, so that snapshots catch the main thread inside pthread_create's
 * clone3 and threads just born. Deterministic: every thread adds its share to a sum under
 * a mutex, and a restored snapshot must print the same "spawned N threads, sum S".
 *   usage: spawn THREADS
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <sdt.h>

static long sum;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int done;

static void *add(void *arg)
{
	long i = (long)arg;
	pthread_mutex_lock(&lock);
	sum += i * i % 97;
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void *tick(void *arg)
{
	(void)arg;
	struct timespec ms = { 0, 1000000 };
	while (!atomic_load(&done)) {
		SetBreakpoint(1, 1, 1, 1, "phase=tick");
		nanosleep(&ms, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = argc > 1 ? atol(argv[1]) : 100;
	pthread_t ticker;
	pthread_create(&ticker, NULL, tick, NULL);
	for (long i = 0; i < threads; i++) {
		pthread_t t;
		pthread_create(&t, NULL, add, (void *)i);
		pthread_join(t, NULL);
	}
	atomic_store(&done, 1);
	pthread_join(ticker, NULL);
	printf("spawned %ld threads, sum %ld\n", threads, sum);
	return 0;
}
