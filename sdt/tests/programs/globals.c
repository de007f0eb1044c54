/*
 * Globals of every kind, some changed between two breakpoints and some not, for
 * `sdt diff`. Between breakpoint 1 (S0) and 2 (S1) it changes counter, ratio, letter,
 * arr[2], arr[5], all 64 bytes of big, pt.y and the main thread's tls_counter, writes
 * 16 bytes of a heap buffer, and starts a second worker (started: 1 -> 2); the first
 * worker waits in read throughout.
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sdt.h>

int counter = 1;
long unchanged_long = 77;
double ratio = 0.5;
char letter = 'a';
unsigned short small = 7;
bool flag = true;
int arr[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
unsigned char big[64];
struct pair {
	int x;
	double y;
} pt = { 1, 1.5 };
char *buffer;
static int file_static = 5;
__thread int tls_counter;

static int started;
static int wake[2];

/* Sets its tls_counter, counts itself started, and blocks until main writes a byte. */
static void *worker(void *arg)
{
	char byte;
	tls_counter = (int)(long)arg;
	__atomic_fetch_add(&started, 1, __ATOMIC_SEQ_CST);
	if (read(wake[0], &byte, 1) != 1)
		perror("read");
	return NULL;
}

static void start(pthread_t *t, long tls)
{
	int before = __atomic_load_n(&started, __ATOMIC_SEQ_CST);
	pthread_create(t, NULL, worker, (void *)tls);
	while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) == before)
		sched_yield();
}

int main(void)
{
	pthread_t first, second;
	buffer = calloc(1, 4096);
	tls_counter = 1;
	if (pipe(wake) != 0)
		return 1;
	start(&first, 100);
	SetBreakpoint(1, 1, 1, 0, "");

	counter = 2;
	ratio = 0.25;
	letter = 'b';
	arr[2] = 20;
	arr[5] = -5;
	memset(big, 9, sizeof big);
	pt.y = -2.5;
	tls_counter = 2;
	memset(buffer + 100, 0xab, 16);
	start(&second, 200);
	SetBreakpoint(1, 1, 2, 0, "");

	if (write(wake[1], "xx", 2) != 2)
		return 1;
	pthread_join(first, NULL);
	pthread_join(second, NULL);
	printf("globals done: %d %ld %u %d %d %p\n", counter, unchanged_long, small, flag, file_static,
	       (void *)buffer);
	return 0;
}
