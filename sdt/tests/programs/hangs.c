/*
 * A breakpoint, two threads that each take two locks, and a breakpoint after. The threads
 * take the locks in the same order, unless a file named "hang" is in the working
 * directory when they start: then in opposite orders, each holding one while it waits
 * for the other's (a deadlock). Prints "done C" at the end, C the threads' count.
 *   usage: hangs
 */
#include <pthread.h>
#include <stdio.h>
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

int main(void)
{
	SetBreakpoint(1, 1, 1, 1, "before");
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
