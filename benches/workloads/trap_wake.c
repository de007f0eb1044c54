/*
 * How long a tracer takes to see its tracee's breakpoint: the floor under every
 * breakpoint capture's pause (`seen … after the trap` in `RUST_LOG=sdt_daemon=debug`).
 * A traced child computes a while, reads the clock and executes `int3`, 200 times; the
 * tracer reads the clock when its wait returns. Three ways of waiting, each on its own
 * child:
 *
 *   sleeping      blocked in waitpid, on whatever CPU the scheduler picks (as SDT waits);
 *   one CPU       the same, tracer and child pinned to one CPU (no wake-up across CPUs);
 *   spinning      waitpid(WNOHANG) in a loop: no sleep to wake from, one CPU spent.
 *
 * A virtual machine whose idle CPUs halt pays for waking one (an interrupt through the
 * hypervisor): the gap between the first line and the other two.
 *
 *   gcc -O2 benches/workloads/trap_wake.c -o /tmp/trap_wake && /tmp/trap_wake
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TRAPS 200

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return (x > y) - (x < y);
}

/* The child: stops for the tracer to take it, then traps TRAPS times, each after some
 * work, with the time of the trap in `*trapped_at` (shared with the tracer). */
static void trap_repeatedly(volatile long long *trapped_at)
{
	if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0)
		_exit(1);
	raise(SIGSTOP);
	for (int i = 0; i < TRAPS; i++) {
		for (volatile int k = 0; k < 1000000; k++)
			;
		*trapped_at = now_ns();
		__asm__ volatile("int3");
	}
	_exit(0);
}

/* Runs a child and prints the trap-to-seen delays; `spin`: poll instead of sleeping. */
static int measure(const char *name, int spin, volatile long long *trapped_at)
{
	pid_t child = fork();
	if (child < 0)
		return perror("fork"), -1;
	if (child == 0)
		trap_repeatedly(trapped_at);
	int status;
	if (waitpid(child, &status, 0) != child || !WIFSTOPPED(status))
		return fprintf(stderr, "trap_wake: the child did not stop\n"), -1;
	long long delay[TRAPS];
	int n = 0;
	for (ptrace(PTRACE_CONT, child, 0, 0);; ptrace(PTRACE_CONT, child, 0, 0)) {
		pid_t got;
		do
			got = waitpid(child, &status, spin ? WNOHANG : 0);
		while (got == 0);
		long long seen = now_ns();
		if (got != child || !WIFSTOPPED(status) || n == TRAPS)
			break;
		delay[n++] = seen - *trapped_at;
	}
	if (n < TRAPS)
		return fprintf(stderr, "trap_wake: %s: %d traps of %d\n", name, n, TRAPS), -1;
	qsort(delay, n, sizeof *delay, by_value);
	printf("%-9s  p50 %5.1f µs   p90 %5.1f µs   max %6.1f µs\n", name, delay[n / 2] / 1e3,
	       delay[n * 9 / 10] / 1e3, delay[n - 1] / 1e3);
	return 0;
}

int main(void)
{
	volatile long long *trapped_at =
		mmap(NULL, sizeof *trapped_at, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (trapped_at == MAP_FAILED)
		return perror("mmap"), 1;
	printf("trap to tracer, %d traps each\n", TRAPS);
	if (measure("sleeping", 0, trapped_at) != 0)
		return 1;
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	if (sched_setaffinity(0, sizeof one, &one) != 0)
		return perror("sched_setaffinity"), 1;
	if (measure("one CPU", 0, trapped_at) != 0)
		return 1;
	CPU_ZERO(&one);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		CPU_SET(cpu, &one);
	sched_setaffinity(0, sizeof one, &one);
	return measure("spinning", 1, trapped_at) != 0;
}
