/*
 * A breakpoint, two threads that each take two locks, and a breakpoint after. The threads
 * take the locks in the same order, unless a file named "hang" is in the working
 * directory when they start: then in opposite orders, each holding one while it waits
 * for the other's (a deadlock). Prints "done C" at the end, C the threads' count.
 * With "lost", a thread waits for a condition variable that main signalled before it
 * waited, checking no predicate (a lost wake-up), while main joins it: a hang of locks
 * that record no holder.
 *   usage: hangs [lost]
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sdt.h"

static pthread_mutex_t first = PTHREAD_MUTEX_INITIALIZER, second = PTHREAD_MUTEX_INITIALIZER;
static int crossed;
static long count;

static void *worker(void *arg)
{
	int other = (int)(long)arg && crossed;
	pthread_mutex_t *a = other ? &second : &first, *b = other ? &first : &second;
	pthread_mutex_lock(a);
	usleep(100 * 1000); /* both hold their first lock */
	pthread_mutex_lock(b);
	count++;
	pthread_mutex_unlock(b);
	pthread_mutex_unlock(a);
	return NULL;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static sem_t signalled;

static void *sleeper(void *arg)
{
	(void)arg;
	sem_wait(&signalled); /* main signals first */
	pthread_mutex_lock(&lock);
	pthread_cond_wait(&wake, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

int main(int argc, char **argv)
{
	SetBreakpoint(1, 1, 1, 1, "before");
	if (argc > 1 && strcmp(argv[1], "lost") == 0) {
		pthread_t thread;
		sem_init(&signalled, 0, 0);
		pthread_create(&thread, NULL, sleeper, NULL);
		pthread_mutex_lock(&lock);
		pthread_cond_signal(&wake);
		pthread_mutex_unlock(&lock);
		sem_post(&signalled);
		pthread_join(thread, NULL);
		puts("woken");
		return 0;
	}
	crossed = access("hang", F_OK) == 0;
	pthread_t threads[2];
	for (long i = 0; i < 2; i++)
		pthread_create(&threads[i], NULL, worker, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(threads[i], NULL);
	SetBreakpoint(1, 1, 2, 1, "after");
	printf("done %ld\n", count);
	return 0;
}
