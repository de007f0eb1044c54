/*
 * The library tests/programs/loads.c opens and closes: one step of 3x + 1. And a lock
 * tests/programs/blocked.cpp has a thread wait for.
 */
#include <pthread.h>

pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;

long plugin_step(long x)
{
	return 3 * x + 1;
}
