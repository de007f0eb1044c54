/*
 * What a signal the program handles costs it: raises SIGUSR1, which it catches, 20,000
 * times and prints the mean time a signal took. Under `sdt run` every one stops the
 * program for the tracer; with the snapshot at a fatal signal on (the default), the
 * tracer also reads the program's dispositions to see that this one is caught.
 *
 *   gcc -O2 benches/workloads/signal_rate.c -o /tmp/signal_rate
 *   /tmp/signal_rate; sdt run -q -- /tmp/signal_rate; sdt run -q --no-signal-snapshot -- /tmp/signal_rate
 */
#include <signal.h>
#include <stdio.h>
#include <time.h>

#define SIGNALS 20000

static volatile sig_atomic_t handled;

static void on_signal(int sig)
{
	(void)sig;
	handled++;
}

int main(void)
{
	struct timespec start, end;
	signal(SIGUSR1, on_signal);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (int i = 0; i < SIGNALS; i++)
		raise(SIGUSR1);
	clock_gettime(CLOCK_MONOTONIC, &end);
	double us = ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / 1e3;
	printf("%.2f us a signal (%d handled)\n", us / SIGNALS, (int)handled);
	return handled == SIGNALS ? 0 : 1;
}
