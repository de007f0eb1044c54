/*
 * Threads that take snapshots in a loop until the process is killed, in a process that
 * catches signals (so every capture injects rt_sigaction calls into a held thread).
 *   killed THREADS    take S0, print "pid N", start the other threads; then every thread
 *                     writes a little and calls SetBreakpoint forever, printing
 *                     "S<n>" for each snapshot it is told of
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sdt.h>

static char heap[1 << 20];

static void on_signal(int sig)
{
	(void)sig;
}

static void *work(void *arg)
{
	long id = (long)arg;
	char line[32];

	for (unsigned round = 0;; round++) {
		for (size_t i = id * 4096; i < sizeof(heap); i += 8 * 4096)
			heap[i] = (char)round;
		int n = SetBreakpoint(1, 1, 2, 1, "mode=loop");
		if (n >= 0) {
			/* One write per line: lines of different threads do not mix. */
			int len = snprintf(line, sizeof(line), "S%d\n", n);
			if (write(1, line, len) != len)
				return NULL;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 2;
	pthread_t tid;

	signal(SIGTERM, on_signal);
	signal(SIGUSR1, on_signal);
	if (SetBreakpoint(1, 1, 1, 0, "mode=first") != 0)
		return 3;
	printf("pid %d\nS0\n", (int)getpid());
	fflush(stdout);
	for (long i = 1; i < threads; i++)
		pthread_create(&tid, NULL, work, (void *)i);
	work(0);
	return 0;
}
