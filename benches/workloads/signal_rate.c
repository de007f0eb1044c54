/*
 * What a signal the program handles costs it. Under `sdt run` every one stops the
 * program for the tracer; with the snapshot at a fatal signal on (the default), the
 * tracer also reads the program's dispositions to see that this one is caught.
 *
 *   signal_rate            raises SIGUSR1, which it catches, 20,000 times and prints the
 *                          mean time a signal took (the tracer busy with one after another)
 *   signal_rate timer US   computes for about 1 s (alone, here) while a POSIX timer sends it
 *                          SIGUSR1 every US microseconds, and prints how long the work took
 *                          and how many signals came: each finds the tracer idle, as a
 *                          program's timers, profilers and watchdogs do
 *
 *   gcc -O2 benches/workloads/signal_rate.c -o /tmp/signal_rate
 *   /tmp/signal_rate; sdt run -q -- /tmp/signal_rate; sdt run -q --no-signal-snapshot -- /tmp/signal_rate
 *   /tmp/signal_rate timer 1000; sdt run -q -- /tmp/signal_rate timer 1000
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIGNALS 20000

static volatile sig_atomic_t handled;

static void on_signal(int sig)
{
	(void)sig;
	handled++;
}

static double seconds_since(const struct timespec *start)
{
	struct timespec end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	return (end.tv_sec - start->tv_sec) + (end.tv_nsec - start->tv_nsec) / 1e9;
}

/* Work of about 1 s while a timer signals every `us` microseconds. */
static int under_a_timer(long us)
{
	struct sigevent event;
	struct itimerspec every = { { us / 1000000, us % 1000000 * 1000 }, { us / 1000000, us % 1000000 * 1000 } };
	struct timespec start;
	timer_t timer;
	volatile double x = 0;

	memset(&event, 0, sizeof(event));
	event.sigev_notify = SIGEV_SIGNAL;
	event.sigev_signo = SIGUSR1;
	if (us <= 0 || timer_create(CLOCK_MONOTONIC, &event, &timer) != 0 || timer_settime(timer, 0, &every, NULL) != 0)
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (long i = 0; i < 300000000; i++)
		x += i * 0.5;
	double took = seconds_since(&start);
	printf("work took %.3f s, %d signals\n", took, (int)handled);
	return 0;
}

int main(int argc, char **argv)
{
	struct timespec start;
	signal(SIGUSR1, on_signal);
	if (argc == 3 && !strcmp(argv[1], "timer"))
		return under_a_timer(atol(argv[2]));
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (int i = 0; i < SIGNALS; i++)
		raise(SIGUSR1);
	double us = seconds_since(&start) * 1e6;
	printf("%.2f us a signal (%d handled)\n", us / SIGNALS, (int)handled);
	return handled == SIGNALS ? 0 : 1;
}
