/*
 * What a program's threads cost a capture: every one is stopped, read (registers, signal
 * mask, rseq, robust list) and resumed at each snapshot. It starts N threads that wait at
 * a barrier, then reaches 5 breakpoints (level 1, class 1, id 1) 10 ms apart; `sdt ls`
 * gives each one's pause, `RUST_LOG=sdt_daemon=debug` its phases (freeze, registers).
 *
 *   gcc -O2 -I sdt-lib/include benches/workloads/many_threads.c \
 *       target/release/libsdt.a -ldl -lm -lpthread -o /tmp/many_threads
 *   for n in 10 1000 4000; do rm -rf /tmp/threads.sdt; \
 *       sdt run -q --store /tmp/threads.sdt -- /tmp/many_threads $n; sdt ls --store /tmp/threads.sdt; done
 *
 *   With `hold S`, it takes no snapshot and sleeps S seconds with its threads at the
 *   barrier instead, for `gcore` of the same program:
 *
 *   /tmp/many_threads 4000 hold 30 & sleep 2; time gcore -o /tmp/threads.core $!; kill $!
 *
 *   With `onstack`, a SIGUSR1 handler runs on the signal stack (as Rust's and Go's do),
 *   so each capture reads every thread's signal stack too.
 *
 *   usage: many_threads N [hold S | onstack]
 */
#include <pthread.h>
#include <sdt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_barrier_t started, done;

static void ignore(int sig)
{
	(void)sig;
}

static void *worker(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&started);
	pthread_barrier_wait(&done);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	int hold = argc > 3 && !strcmp(argv[2], "hold") ? atoi(argv[3]) : -1;
	int onstack = argc == 3 && !strcmp(argv[2], "onstack");
	if (n < 1 || (argc > 2 && hold < 0 && !onstack)) {
		fprintf(stderr, "usage: many_threads N [hold S | onstack] (N >= 1)\n");
		return 2;
	}
	if (onstack) {
		struct sigaction act = { .sa_handler = ignore, .sa_flags = SA_ONSTACK };
		sigemptyset(&act.sa_mask);
		sigaction(SIGUSR1, &act, NULL);
	}
	pthread_t *threads = calloc(n, sizeof *threads);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	pthread_barrier_init(&started, NULL, n + 1);
	pthread_barrier_init(&done, NULL, n + 1);
	for (int i = 0; i < n; i++) {
		int err = pthread_create(&threads[i], &attr, worker, NULL);
		if (err) {
			fprintf(stderr, "thread %d of %d: pthread_create failed (%d)\n", i, n, err);
			return 1;
		}
	}
	pthread_barrier_wait(&started);
	struct timespec gap = { 0, 10 * 1000 * 1000 };
	if (hold >= 0)
		sleep(hold);
	for (int i = 0; hold < 0 && i < 5; i++) {
		SetBreakpoint(1, 1, 1, 1, "");
		nanosleep(&gap, NULL);
	}
	pthread_barrier_wait(&done);
	for (int i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	printf("%d threads\n", n);
	return 0;
}
