/*
 * Behaves like a program should under `sdt run` as without it.
 *   behave echo         copy stdin to stdout, upper-cased
 *   behave exit N       SetBreakpoint, then exit with N
 *   behave signals      handle SIGUSR1 and SIGRTMIN+1 sent to itself, print what arrived
 *   behave segv         SetBreakpoint, then die of SIGSEGV
 *   behave abort-thread SetBreakpoint; a worker sets `progress` to 3 and calls abort()
 *                       in give_up() while main waits in pthread_join
 *   behave wait-term    print "ready", then wait for SIGTERM and exit 0 when it comes
 *   behave fork         SetBreakpoint; fork a child that calls SetBreakpoint (untraced:
 *                       must return SDT_OFF) and exec a child that does the same
 *   behave fork-setting-up
 *                       a worker passes the process's first breakpoint, and while the
 *                       library sets up (held inside its read of /proc/self/status by this
 *                       program's open64, which the library calls), main forks a child
 *                       that calls SetBreakpoint: print what the child's call returned (or
 *                       "forked child hung" after 5 s), then what the worker's did
 *   behave big MB       fill MB of heap, SetBreakpoint, print "pid N", then keep changing
 *                       the heap and taking snapshots (for killing it mid-capture)
 *   behave leader-exits the main thread calls pthread_exit; a worker takes snapshots and
 *                       ends the process with exit(4)
 *   behave exec         SetBreakpoint, then execve itself as "behave exit 6"
 *   behave traps        handle SIGTRAP; raise it, execute an int3, pass a breakpoint,
 *                       then execute an int3 with the registers the breakpoint's had
 *                       (as code after an inlined SetBreakpoint may): print how many
 *                       SIGTRAPs arrived
 *   behave waits        threads wait in read, poll, nanosleep, sem_timedwait and
 *                       epoll_wait while main passes 20 breakpoints; print how often
 *                       each wait failed with EINTR
 *   behave highfd N     hold /dev/null as descriptor N, SetBreakpoint, then print
 *                       "fd N open" if it still is
 *   behave vfork-stuck  a worker vforks a child that waits for a byte on stdin before it
 *                       exits: until then the worker cannot be stopped (a vfork parent
 *                       waits killably only); main calls SetBreakpoint meanwhile and
 *                       prints "bp N", then "done" once the worker is back
 *   behave tight MB     fill MB of heap, a pattern a page, SetBreakpoint, write a tenth of
 *                       its pages, SetBreakpoint, then print "sum N" over every page
 *   behave grow MB MORE fill MB of heap, SetBreakpoint, write a page, SetBreakpoint, wait
 *                       a second (the first snapshot's write ends), then fill MORE MB more,
 *                       SetBreakpoint, and print "sum N" over every page
 *   behave alarm HOW    set ITIMER_REAL to 1 s, SetBreakpoint, then wait for SIGALRM and
 *                       print "alarm": HOW is `handler` (caught, waited for with pause),
 *                       `sigwait` (blocked in both threads, taken by sigwait) or `posix`
 *                       (as `handler`, holding a POSIX timer too)
 *   behave limits       lower its descriptor limits to 200 (soft) and 300 (hard) and its
 *                       stack's soft limit to 4 MiB, SetBreakpoint, then print them
 *   behave tmpfile      write "hello deleted file" to a tmpfile() (deleted at once), seek
 *                       to 6, dup it, open a read-only O_TMPFILE-made file again,
 *                       SetBreakpoint, then read on, append "!" through the dup and print
 *                       what each holds
 *   behave shared       map 256 MiB of shared memory and a private mapping of a 256 MiB
 *                       memfd; a forked child writes 'c' 100 MiB into the shared memory
 *                       (a page the program never touches), the memfd gets 'f' at 200
 *                       MiB, the program writes 'a' and 'p' at the start of each;
 *                       SetBreakpoint, then print by how many KiB its shared memory grew
 *                       and the four bytes (the memfd's through its descriptor)
 *   behave views [closed]
 *                       map one memfd page twice, shared (and close the memfd); write 'x'
 *                       through the first view, SetBreakpoint, write 'y' through it and
 *                       print what the second view shows (and the memfd, read through
 *                       its descriptor)
 *   behave gone PATH [keep]
 *                       make a file of three pages at PATH, map it shared twice (the
 *                       whole file, and its first page again), write '1' at its start and
 *                       'p' on its third page, SetBreakpoint, add one at its start through
 *                       the first view, print what the views show and remove the file
 *                       (unless `keep`), as a JVM does with its hsperfdata file
 *   behave huge         map 16 MiB of private huge pages (MAP_HUGETLB), fill its first 8
 *                       MiB with 'x', SetBreakpoint, print how many huge pages the
 *                       machine's pool lost meanwhile (or "no huge pages"), write 'i' at
 *                       11 MiB and SetBreakpoint again
 *   behave fds N        open N descriptors, by turns its own program file (argv[0])
 *                       and /dev/null, pass two breakpoints, then print "done"
 *   behave sched        a worker takes nice 7 and SCHED_BATCH, main pins itself to CPU 0;
 *                       SetBreakpoint, then each prints its CPUs, policy and nice value
 *   behave personality  SetBreakpoint, then print its personality (hexadecimal)
 *   behave umask        set its umask to 027, SetBreakpoint, then create a file (mode
 *                       0666) and print its permissions and the umask
 *   behave altstack     main and a worker each set an alternate signal stack (the
 *                       worker's SS_AUTODISARM) and a SIGUSR1 handler runs on it
 *                       (SA_ONSTACK); main passes a breakpoint while the worker waits at
 *                       a barrier, then each takes a SIGUSR1 and prints whether its
 *                       stack and flags are still those it set and the handler ran on it
 *   behave altstack-sandboxed
 *                       a SIGUSR1 handler runs on the signal stack; a worker sets one and
 *                       sandboxes itself alone with a filter that kills the process at
 *                       sigaltstack(2); main passes a breakpoint, then prints "done"
 *   behave tight-stack  a SIGUSR1 handler runs on the signal stack; a worker sets one,
 *                       then sleeps in futex(2) on a stack of 256 bytes just above an
 *                       inaccessible page; main passes a breakpoint, wakes it, prints "done"
 *   behave ids          SetBreakpoint, then print its user and group ids (real,
 *                       effective, saved), supplementary groups and effective
 *                       capabilities, and whether a file of root's reads as root's
 */
#define _GNU_SOURCE /* O_TMPFILE */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <sdt.h>

static volatile sig_atomic_t got_usr1, got_rt, got_term, got_trap, got_alarm;

/* The process's state letter in /proc/self/stat: the leader's ('Z' once it has exited). */
static char process_state(void)
{
	char buf[512];
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	char *end;

	if (f)
		fclose(f);
	buf[n] = '\0';
	end = strrchr(buf, ')');
	return end && end[1] && end[2] ? end[2] : '?';
}

static void *outlive_main(void *arg)
{
	(void)arg;
	/* Until main is gone (a zombie leader), however slow the machine: at most 10 s. */
	for (int i = 0; i < 1000 && process_state() != 'Z'; i++)
		usleep(10 * 1000);
	for (int i = 0; i < 3; i++)
		SetBreakpoint(1, 1, 1, 1, "mode=leader-exits");
	printf("worker done\n");
	fflush(stdout);
	exit(4);
}

/* `behave fork-setting-up`: the worker held in the library's first open64 of
 * /proc/self/status until main has forked. */
static sem_t setting_up, forked;
static volatile int hold_setup;
static pid_t holding_pid;

int open64(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = va_arg(ap, mode_t);
	va_end(ap);
	if (hold_setup && getpid() == holding_pid && !strcmp(path, "/proc/self/status")) {
		hold_setup = 0;
		sem_post(&setting_up);
		while (sem_wait(&forked) != 0)
			;
	}
	return syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static void *first_breakpoint(void *arg)
{
	(void)arg;
	return (void *)(long)SetBreakpoint(1, 1, 1, 0, "mode=fork-setting-up");
}

/* Waits up to 5 s for `child`: its exit code, or -1 (killed) when it did not end. */
static int wait_briefly(pid_t child)
{
	int status;
	for (int i = 0; i < 500; i++) {
		if (waitpid(child, &status, WNOHANG) == child)
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		usleep(10 * 1000);
	}
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	return -1;
}

static volatile long progress;

static void give_up(void)
{
	progress = 3;
	abort();
}

static volatile int main_joins;

static void *abort_soon(void *arg)
{
	(void)arg;
	/* Not before main is on its way into pthread_join. */
	while (!main_joins)
		usleep(1000);
	usleep(20 * 1000);
	give_up();
	return NULL;
}

static void *vfork_and_wait(void *arg)
{
	(void)arg;
	pid_t child = vfork();
	if (child == 0) {
		char byte;
		/* Shares the worker's memory and stack: only system calls until _exit. */
		while (read(0, &byte, 1) < 0)
			;
		_exit(0);
	}
	waitpid(child, NULL, 0);
	return NULL;
}

/* `behave waits`: EINTRs by wait, and when to stop. */
enum { WAIT_READ, WAIT_POLL, WAIT_SLEEP, WAIT_SEM, WAIT_EPOLL, WAITS };
static volatile int interrupted[WAITS], waits_done;
static int wait_pipe[2];
static sem_t wait_sem;

static void *wait_in(void *arg)
{
	int which = (int)(long)arg, ep = epoll_create1(0), r = 0;
	char c;

	while (!waits_done) {
		struct timespec ten_ms = { 0, 10000000 }, until;

		switch (which) {
		case WAIT_READ:
			r = (int)read(wait_pipe[0], &c, 1);
			break;
		case WAIT_POLL:
			r = poll(NULL, 0, 10);
			break;
		case WAIT_SLEEP:
			r = nanosleep(&ten_ms, NULL);
			break;
		case WAIT_SEM:
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 1;
			r = sem_timedwait(&wait_sem, &until);
			break;
		default: {
			struct epoll_event ev;
			r = epoll_wait(ep, &ev, 1, 10);
		}
		}
		if (r < 0 && errno == EINTR)
			interrupted[which]++;
	}
	close(ep);
	return NULL;
}

static void on_signal(int sig)
{
	if (sig == SIGTRAP)
		got_trap++;
	else if (sig == SIGUSR1)
		got_usr1++;
	else if (sig == SIGTERM)
		got_term = 1;
	else
		got_rt++;
}

static void on_alarm(int sig)
{
	(void)sig;
	got_alarm = 1;
}

static void *idle_until_cancelled(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* `behave alarm HOW`: ITIMER_REAL due in 1 s across a breakpoint. */
static int wait_for_alarm(const char *how)
{
	struct itimerval in_a_second = { { 0, 0 }, { 1, 0 } };
	sigset_t alarm_only;
	pthread_t other;
	timer_t posix;
	struct sigevent quiet = { .sigev_notify = SIGEV_NONE };
	int sig;

	sigemptyset(&alarm_only);
	sigaddset(&alarm_only, SIGALRM);
	if (strcmp(how, "sigwait"))
		signal(SIGALRM, on_alarm);
	if (!strcmp(how, "posix") && timer_create(CLOCK_MONOTONIC, &quiet, &posix) != 0)
		return 1;
	/* A second thread that blocks SIGALRM: it reaches main, which blocks it too only
	 * to sigwait for it. */
	pthread_sigmask(SIG_BLOCK, &alarm_only, NULL);
	pthread_create(&other, NULL, idle_until_cancelled, NULL);
	if (strcmp(how, "sigwait"))
		pthread_sigmask(SIG_UNBLOCK, &alarm_only, NULL);
	if (setitimer(ITIMER_REAL, &in_a_second, NULL) != 0)
		return 1;
	SetBreakpoint(1, 1, 1, 0, "mode=alarm");
	if (!strcmp(how, "sigwait")) {
		if (sigwait(&alarm_only, &sig) != 0 || sig != SIGALRM)
			return 1;
	} else {
		while (!got_alarm)
			pause();
	}
	printf("alarm\n");
	return 0;
}

/* `behave limits`: limits of its own across a breakpoint. */
static int own_limits(void)
{
	struct rlimit files = { 200, 300 }, stack;

	if (setrlimit(RLIMIT_NOFILE, &files) != 0 || getrlimit(RLIMIT_STACK, &stack) != 0)
		return 1;
	stack.rlim_cur = 4 << 20;
	if (setrlimit(RLIMIT_STACK, &stack) != 0)
		return 1;
	SetBreakpoint(1, 1, 1, 0, "mode=limits");
	if (getrlimit(RLIMIT_NOFILE, &files) != 0 || getrlimit(RLIMIT_STACK, &stack) != 0)
		return 1;
	printf("nofile %llu/%llu stack %llu\n", (unsigned long long)files.rlim_cur,
	       (unsigned long long)files.rlim_max, (unsigned long long)stack.rlim_cur);
	return 0;
}

/* `behave tmpfile`: deleted files held across a breakpoint. */
static int deleted_files(void)
{
	char rest[64] = { 0 }, all[64] = { 0 }, other[16] = { 0 }, path[64];
	FILE *scratch = tmpfile();
	int fd = open(".", O_TMPFILE | O_RDWR, 0600), reader, dup_fd;

	if (!scratch || fd < 0 || write(fd, "second", 6) != 6)
		return 1;
	/* The same deleted file, read-only: a write through it fails. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	reader = open(path, O_RDONLY);
	close(fd);
	if (reader < 0 || fputs("hello deleted file", scratch) < 0 || fflush(scratch) != 0)
		return 1;
	if (fseek(scratch, 6, SEEK_SET) != 0 || (dup_fd = dup(fileno(scratch))) < 0)
		return 1;
	SetBreakpoint(1, 1, 1, 0, "mode=tmpfile");
	if (!fgets(rest, sizeof(rest), scratch) || pwrite(dup_fd, "!", 1, 18) != 1)
		return 1;
	if (pread(dup_fd, all, sizeof(all) - 1, 0) < 0 || pread(reader, other, sizeof(other) - 1, 0) < 0)
		return 1;
	printf("rest \"%s\" all \"%s\" other \"%s\" write %s\n", rest, all, other,
	       write(reader, "x", 1) < 0 && errno == EBADF ? "refused" : "allowed");
	return 0;
}

/* The number on the line of `file` that `format` (sscanf's, "Name: %ld") matches, or -1. */
static long proc_number(const char *file, const char *format)
{
	char line[128];
	long n = -1;
	FILE *f = fopen(file, "r");

	while (f && fgets(line, sizeof(line), f))
		sscanf(line, format, &n);
	if (f)
		fclose(f);
	return n;
}

/* The program's shared memory in its own page tables, in KiB. */
static long shmem_kib(void)
{
	return proc_number("/proc/self/status", "RssShmem: %ld");
}

/* `behave shared`: large shared mappings holding a few pages, one of them written by a
 * child only. */
char *shared_anon, *shared_memfd;

static int sparse_shared(void)
{
	const size_t len = 256 << 20;
	int fd = memfd_create("sparse", 0);
	long before;
	char from_file;
	pid_t child;

	shared_anon = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared_anon == MAP_FAILED || fd < 0 || ftruncate(fd, len) != 0)
		return 1;
	shared_memfd = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (shared_memfd == MAP_FAILED || (child = fork()) < 0)
		return 1;
	if (child == 0) {
		shared_anon[100 << 20] = 'c';
		_exit(0);
	}
	if (waitpid(child, NULL, 0) != child || pwrite(fd, "f", 1, 200 << 20) != 1)
		return 1;
	shared_anon[0] = 'a';
	shared_memfd[0] = 'p';
	before = shmem_kib();
	SetBreakpoint(1, 1, 1, 0, "mode=shared");
	if (pread(fd, &from_file, 1, 200 << 20) != 1)
		return 1;
	printf("shared memory grew %ld KiB, holds %c%c%c%c\n", shmem_kib() - before, shared_anon[0],
	       shared_anon[100 << 20], shared_memfd[0], from_file);
	return 0;
}

/* `behave views`: two views of one memfd page, as a JIT's write-xor-execute pair. */
static int two_views(int closed)
{
	int fd = memfd_create("views", 0);
	char *view, *other, read_back = '?';

	if (fd < 0 || ftruncate(fd, 4096) != 0)
		return 1;
	view = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	other = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (view == MAP_FAILED || other == MAP_FAILED)
		return 1;
	if (closed)
		close(fd);
	view[0] = 'x';
	SetBreakpoint(1, 1, 1, 0, "mode=views");
	view[0] = 'y';
	if (closed) {
		printf("view %c\n", other[0]);
	} else {
		if (pread(fd, &read_back, 1, 0) != 1)
			return 1;
		printf("view %c file %c\n", other[0], read_back);
	}
	return 0;
}

/* `behave gone PATH [keep]`: a shared mapping of a file removed as the program exits. */
static int gone_file(const char *path, int keep)
{
	int fd;
	char *view, *other;

	fd = open(path, O_RDWR | O_CREAT, 0600);
	if (fd < 0 || ftruncate(fd, 3 * 4096) != 0)
		return 1;
	view = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	other = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (view == MAP_FAILED || other == MAP_FAILED)
		return 1;
	view[0] = '1';
	view[2 * 4096] = 'p';
	SetBreakpoint(1, 1, 1, 0, "mode=gone");
	view[0] += 1;
	printf("view %c other %c page %c\n", view[0], other[0], view[2 * 4096]);
	/* Resumed, the file is gone already. */
	if (!keep)
		unlink(path);
	return 0;
}

/* The machine's free huge pages. */
static long free_huge_pages(void)
{
	return proc_number("/proc/meminfo", "HugePages_Free: %ld");
}

/* `behave huge`: private huge pages, some of them used. */
char *huge;

static int private_huge_pages(void)
{
	long before;

	huge = mmap(NULL, 16 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (huge == MAP_FAILED) {
		printf("no huge pages\n");
		return 0;
	}
	memset(huge, 'x', 8 << 20);
	before = free_huge_pages();
	SetBreakpoint(1, 1, 1, 0, "mode=huge");
	printf("huge pages taken %ld\n", before - free_huge_pages());
	huge[11 << 20] = 'i';
	SetBreakpoint(1, 1, 2, 0, "mode=huge");
	return 0;
}

/* `behave fds N`: many descriptors across breakpoints. */
static int many_descriptors(const char *self, int n)
{
	for (int i = 0; i < n; i++) {
		if (open(i % 2 ? "/dev/null" : self, O_RDONLY) < 0)
			return 1;
	}
	SetBreakpoint(1, 1, 1, 1, "mode=fds");
	SetBreakpoint(1, 1, 1, 1, "mode=fds");
	printf("done\n");
	return 0;
}

/* Prints WHO's CPUs, scheduling policy and nice value. */
static void print_scheduling(const char *who)
{
	cpu_set_t cpus;
	int first = 1;

	if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0)
		exit(1);
	printf("%s cpus", who);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (CPU_ISSET(cpu, &cpus)) {
			printf("%s%d", first ? " " : ",", cpu);
			first = 0;
		}
	}
	printf(" policy %d nice %d\n", sched_getscheduler(0), getpriority(PRIO_PROCESS, 0));
}

static sem_t scheduled, may_print;

static void *scheduled_worker(void *unused)
{
	struct sched_param none = { 0 };

	(void)unused;
	if (setpriority(PRIO_PROCESS, 0, 7) != 0 || pthread_setschedparam(pthread_self(), SCHED_BATCH, &none) != 0)
		exit(1);
	sem_post(&scheduled);
	while (sem_wait(&may_print) != 0)
		;
	print_scheduling("worker");
	return NULL;
}

/* `behave sched`: threads' CPUs, policy and nice value across a breakpoint. */
static int own_scheduling(void)
{
	pthread_t worker;
	cpu_set_t first_cpu;

	sem_init(&scheduled, 0, 0);
	sem_init(&may_print, 0, 0);
	pthread_create(&worker, NULL, scheduled_worker, NULL);
	while (sem_wait(&scheduled) != 0)
		;
	CPU_ZERO(&first_cpu);
	CPU_SET(0, &first_cpu);
	if (sched_setaffinity(0, sizeof(first_cpu), &first_cpu) != 0)
		return 1;
	SetBreakpoint(1, 1, 1, 0, "mode=sched");
	sem_post(&may_print);
	pthread_join(worker, NULL);
	print_scheduling("main");
	return 0;
}

/* `behave umask`: the file mode creation mask across a breakpoint. */
static int own_umask(void)
{
	struct stat made;
	mode_t mask;
	int fd;

	umask(027);
	SetBreakpoint(1, 1, 1, 0, "mode=umask");
	mask = umask(027);
	fd = open("made-after-breakpoint", O_CREAT | O_TRUNC | O_WRONLY, 0666);
	if (fd < 0 || fstat(fd, &made) != 0)
		return 1;
	close(fd);
	unlink("made-after-breakpoint");
	printf("umask %03o created %03o\n", (unsigned)mask, (unsigned)(made.st_mode & 0777));
	return 0;
}

#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1U << 31)
#endif

/* Where the last SIGUSR1 handler of the thread ran. */
static __thread uintptr_t handled_at;

static void note_stack(int sig)
{
	(void)sig;
	handled_at = (uintptr_t)__builtin_frame_address(0);
}

/*
 * Gives the calling thread an alternate signal stack of its own (SS_AUTODISARM where
 * `disarm`), waits at `meet` (the breakpoint), then takes a SIGUSR1 and says whether
 * its stack is still the one it set, and whether the handler ran on it: the worker
 * first.
 */
static void own_signal_stack(const char *who, int disarm, pthread_barrier_t *meet)
{
	size_t size = 64 * 1024;
	stack_t set = { .ss_sp = malloc(size), .ss_size = size, .ss_flags = disarm ? SS_AUTODISARM : 0 };
	stack_t now;
	uintptr_t base = (uintptr_t)set.ss_sp;
	int on;

	if (!base || sigaltstack(&set, NULL) != 0)
		exit(1);
	pthread_barrier_wait(meet);
	if (!disarm)
		SetBreakpoint(1, 1, 1, 0, "mode=altstack");
	pthread_barrier_wait(meet);
	/* The worker's turn first, then main's. */
	if (!disarm)
		pthread_barrier_wait(meet);
	pthread_kill(pthread_self(), SIGUSR1);
	sigaltstack(NULL, &now);
	on = handled_at > base && handled_at < base + size;
	printf("%s: stack %s, flags %s, handler %s it\n", who,
	       (uintptr_t)now.ss_sp == base && now.ss_size == size ? "same" : "lost",
	       (now.ss_flags & SS_AUTODISARM) == (disarm ? SS_AUTODISARM : 0) ? "same" : "lost",
	       on ? "on" : "off");
	fflush(stdout);
	if (disarm)
		pthread_barrier_wait(meet);
}

static void *signal_stack_worker(void *meet)
{
	own_signal_stack("worker", 1, meet);
	return NULL;
}

/* Makes SIGUSR1's handler run on the signal stack, and starts `run` with `meet` for two. */
static void start_signal_stack_worker(pthread_t *worker, void *(*run)(void *), pthread_barrier_t *meet)
{
	struct sigaction act = { .sa_handler = note_stack, .sa_flags = SA_ONSTACK };

	sigemptyset(&act.sa_mask);
	sigaction(SIGUSR1, &act, NULL);
	pthread_barrier_init(meet, NULL, 2);
	pthread_create(worker, NULL, run, meet);
}

/* `behave altstack`: alternate signal stacks (Go's runtime needs one on every thread). */
static int own_signal_stacks(void)
{
	pthread_barrier_t meet;
	pthread_t worker;

	start_signal_stack_worker(&worker, signal_stack_worker, &meet);
	own_signal_stack("main", 0, &meet);
	pthread_join(worker, NULL);
	return 0;
}

/*
 * Sets a signal stack, then sandboxes the calling thread alone with a filter that kills
 * the process at sigaltstack(2), a call it never makes again; waits twice at `meet`.
 */
static void *sandboxed_stack_worker(void *meet)
{
	stack_t set = { .ss_sp = malloc(64 * 1024), .ss_size = 64 * 1024 };
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sigaltstack, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };

	if (!set.ss_sp || sigaltstack(&set, NULL) != 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
		exit(2);
	pthread_barrier_wait(meet);
	pthread_barrier_wait(meet);
	return NULL;
}

/*
 * `behave altstack-sandboxed`: a SIGUSR1 handler runs on the signal stack; a worker with
 * one sandboxes itself against sigaltstack(2) while main passes a breakpoint.
 */
static int sandboxed_signal_stack(void)
{
	pthread_barrier_t meet;
	pthread_t worker;

	start_signal_stack_worker(&worker, sandboxed_stack_worker, &meet);
	pthread_barrier_wait(&meet);
	SetBreakpoint(1, 1, 1, 0, "mode=altstack-sandboxed");
	pthread_barrier_wait(&meet);
	pthread_join(worker, NULL);
	printf("done\n");
	return 0;
}

/* The futex word the worker of `behave tight-stack` sleeps on, and its thread id. */
static atomic_int tight_wake;
static atomic_int tight_tid;
static ucontext_t tight_caller, tight_context;

/* Sleeps until `tight_wake` is set, by raw calls: the stack has room for little else. */
static void sleep_on_tight_stack(void)
{
	while (!atomic_load(&tight_wake))
		syscall(SYS_futex, &tight_wake, FUTEX_WAIT, 0, NULL, NULL, 0);
}

/*
 * Sets a signal stack, then sleeps on a stack of 256 bytes whose bottom is the first
 * byte after an inaccessible page: nothing may be written below its red zone.
 */
static void *tight_stack_worker(void *unused)
{
	long page = sysconf(_SC_PAGESIZE);
	char *guard = mmap(NULL, 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	stack_t set = { .ss_sp = malloc(64 * 1024), .ss_size = 64 * 1024 };

	(void)unused;
	if (guard == MAP_FAILED || mprotect(guard + page, page, PROT_READ | PROT_WRITE) != 0 || !set.ss_sp ||
	    sigaltstack(&set, NULL) != 0 || getcontext(&tight_context) != 0)
		exit(2);
	tight_context.uc_stack.ss_sp = guard + page;
	tight_context.uc_stack.ss_size = 256;
	tight_context.uc_link = &tight_caller;
	makecontext(&tight_context, sleep_on_tight_stack, 0);
	atomic_store(&tight_tid, (int)syscall(SYS_gettid));
	swapcontext(&tight_caller, &tight_context);
	return NULL;
}

/* Whether thread `tid` sleeps in futex(2), its stack pointer in a page's first 256 bytes. */
static int sleeps_on_tight_stack(int tid)
{
	char path[64];
	unsigned long sp = 0;
	long nr = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%ld %*x %*x %*x %*x %*x %*x %lx", &nr, &sp) != 2)
		nr = -1;
	fclose(f);
	return nr == SYS_futex && sp % sysconf(_SC_PAGESIZE) < 256;
}

/*
 * `behave tight-stack`: a SIGUSR1 handler runs on the signal stack; a worker with one
 * sleeps on a stack without room below it while main passes a breakpoint.
 */
static int tight_signal_stack(void)
{
	struct sigaction act = { .sa_handler = note_stack, .sa_flags = SA_ONSTACK };
	pthread_t worker;

	sigemptyset(&act.sa_mask);
	sigaction(SIGUSR1, &act, NULL);
	pthread_create(&worker, NULL, tight_stack_worker, NULL);
	while (!atomic_load(&tight_tid) || !sleeps_on_tight_stack(atomic_load(&tight_tid)))
		usleep(1000);
	SetBreakpoint(1, 1, 1, 0, "mode=tight-stack");
	atomic_store(&tight_wake, 1);
	syscall(SYS_futex, &tight_wake, FUTEX_WAKE, 1, NULL, NULL, 0);
	pthread_join(worker, NULL);
	printf("done\n");
	return 0;
}

/* `behave ids`: who it is after a breakpoint. */
static int own_ids(void)
{
	uid_t uid[3];
	gid_t gid[3], groups[16];
	char line[128], caps[64] = "?";
	struct stat root_file;
	FILE *status;
	int n;

	SetBreakpoint(1, 1, 1, 0, "mode=ids");
	if (getresuid(&uid[0], &uid[1], &uid[2]) != 0 || getresgid(&gid[0], &gid[1], &gid[2]) != 0)
		return 1;
	if ((n = getgroups(16, groups)) < 0 || !(status = fopen("/proc/self/status", "r")) ||
	    stat("/", &root_file) != 0)
		return 1;
	while (fgets(line, sizeof(line), status))
		sscanf(line, "CapEff: %63s", caps);
	fclose(status);
	printf("uid %u %u %u gid %u %u %u groups", uid[0], uid[1], uid[2], gid[0], gid[1], gid[2]);
	for (int i = 0; i < n; i++)
		printf(" %u", groups[i]);
	printf(" CapEff %s / owned by %u\n", caps, root_file.st_uid);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	if (!strcmp(mode, "echo")) {
		int c;
		SetBreakpoint(1, 1, 1, 0, "mode=echo");
		while ((c = getchar()) != EOF)
			putchar(toupper(c));
		return 0;
	}
	if (!strcmp(mode, "exit") && argc > 2) {
		SetBreakpoint(1, 1, 1, 0, "mode=exit");
		return atoi(argv[2]);
	}
	if (!strcmp(mode, "signals")) {
		signal(SIGUSR1, on_signal);
		signal(SIGRTMIN + 1, on_signal);
		kill(getpid(), SIGUSR1);
		SetBreakpoint(1, 1, 1, 0, "mode=signals");
		kill(getpid(), SIGRTMIN + 1);
		kill(getpid(), SIGRTMIN + 1);
		printf("usr1=%d rt=%d\n", (int)got_usr1, (int)got_rt);
		return 0;
	}
	if (!strcmp(mode, "traps")) {
		struct sdt_trap trap;

		signal(SIGTRAP, on_signal);
		raise(SIGTRAP);
		__asm__ volatile("int3");
		if (sdt_arm(&trap, 1, 1, 1, 0, "mode=traps") == 0)
			__asm__ volatile("int3" : : "a"(SDT_TRAP_MAGIC), "D"(&trap) : "memory");
		__asm__ volatile("int3" : : "a"(SDT_TRAP_MAGIC), "D"(&trap) : "memory");
		printf("traps=%d result=%lld\n", (int)got_trap, trap.result);
		return 0;
	}
	if (!strcmp(mode, "segv")) {
		SetBreakpoint(1, 1, 1, 0, "mode=segv");
		volatile int *p = NULL;
		return *p;
	}
	if (!strcmp(mode, "abort-thread")) {
		pthread_t worker;
		SetBreakpoint(1, 1, 1, 0, "mode=abort-thread");
		pthread_create(&worker, NULL, abort_soon, NULL);
		main_joins = 1;
		pthread_join(worker, NULL);
		return 0;
	}
	if (!strcmp(mode, "wait-term")) {
		signal(SIGTERM, on_signal);
		printf("ready\n");
		fflush(stdout);
		while (!got_term)
			pause();
		printf("got SIGTERM\n");
		return 0;
	}
	if (!strcmp(mode, "fork")) {
		printf("parent %d\n", SetBreakpoint(1, 1, 1, 0, "mode=fork"));
		fflush(stdout);
		pid_t child = fork();
		if (child == 0) {
			printf("forked child %d\n", SetBreakpoint(1, 1, 2, 1, "mode=forked"));
			fflush(stdout);
			execl("/proc/self/exe", argv[0], "exit", "5", (char *)NULL);
			_exit(99);
		}
		int status;
		waitpid(child, &status, 0);
		printf("child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
		return 0;
	}
	if (!strcmp(mode, "fork-setting-up")) {
		pthread_t worker;
		struct timespec until;
		void *result;

		if (sem_init(&setting_up, 0, 0) != 0 || sem_init(&forked, 0, 0) != 0)
			return 1;
		holding_pid = getpid();
		hold_setup = 1;
		pthread_create(&worker, NULL, first_breakpoint, NULL);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 5;
		if (sem_timedwait(&setting_up, &until) != 0) {
			printf("the library did not read /proc/self/status\n");
			return 1;
		}
		pid_t child = fork();
		if (child == 0) {
			int r = SetBreakpoint(1, 1, 2, 1, "mode=forked");
			_exit(r == SDT_OFF ? 0 : 1);
		}
		int code = wait_briefly(child);
		if (code < 0)
			printf("forked child hung\n");
		else
			printf("forked child %s\n", code == 0 ? "off" : "not off");
		sem_post(&forked);
		pthread_join(worker, &result);
		printf("worker %ld\n", (long)result);
		return 0;
	}
	if (!strcmp(mode, "leader-exits")) {
		pthread_t worker;
		pthread_create(&worker, NULL, outlive_main, NULL);
		pthread_exit(NULL);
	}
	if (!strcmp(mode, "exec")) {
		printf("before exec %d\n", SetBreakpoint(1, 1, 1, 0, "mode=exec"));
		fflush(stdout);
		execl("/proc/self/exe", argv[0], "exit", "6", (char *)NULL);
		return 99;
	}
	if (!strcmp(mode, "waits")) {
		pthread_t waiting[WAITS];

		if (pipe(wait_pipe) != 0 || sem_init(&wait_sem, 0, 0) != 0)
			return 1;
		for (long i = 0; i < WAITS; i++)
			pthread_create(&waiting[i], NULL, wait_in, (void *)i);
		for (int i = 0; i < 20; i++) {
			usleep(3000);
			SetBreakpoint(1, 1, 1, 1, "mode=waits");
		}
		waits_done = 1;
		if (write(wait_pipe[1], "x", 1) != 1 || sem_post(&wait_sem) != 0)
			return 1;
		for (int i = 0; i < WAITS; i++)
			pthread_join(waiting[i], NULL);
		printf("read=%d poll=%d sleep=%d sem=%d epoll=%d\n", interrupted[WAIT_READ],
		       interrupted[WAIT_POLL], interrupted[WAIT_SLEEP], interrupted[WAIT_SEM],
		       interrupted[WAIT_EPOLL]);
		return 0;
	}
	if (!strcmp(mode, "highfd") && argc == 3) {
		int n = atoi(argv[2]), fd = open("/dev/null", O_RDONLY);

		if (fd < 0 || dup2(fd, n) != n)
			return 1;
		close(fd);
		SetBreakpoint(1, 1, 1, 0, "mode=highfd");
		if (fcntl(n, F_GETFD) >= 0)
			printf("fd %d open\n", n);
		return 0;
	}
	if (!strcmp(mode, "vfork-stuck")) {
		pthread_t worker;
		pthread_create(&worker, NULL, vfork_and_wait, NULL);
		usleep(200 * 1000);
		printf("bp %d\n", SetBreakpoint(1, 1, 1, 0, "mode=vfork-stuck"));
		fflush(stdout);
		pthread_join(worker, NULL);
		printf("done\n");
		return 0;
	}
	if (!strcmp(mode, "big") && argc > 2) {
		size_t len = (size_t)atol(argv[2]) << 20;
		unsigned char *heap = malloc(len);
		if (!heap)
			return 3;
		memset(heap, 0x5a, len);
		SetBreakpoint(1, 1, 1, 0, "mode=big");
		printf("pid %d\n", (int)getpid());
		fflush(stdout);
		for (int round = 0; round < 1000; round++) {
			for (size_t i = 0; i < len; i += 4096)
				heap[i] = (unsigned char)round;
			SetBreakpoint(1, 1, 2, 1, "mode=big");
		}
		return 0;
	}
	if (!strcmp(mode, "tight") && argc == 3) {
		size_t pages = ((size_t)atol(argv[2]) << 20) / 4096;
		unsigned char *heap = malloc(pages * 4096);
		unsigned long sum = 0;
		if (!heap)
			return 3;
		for (size_t p = 0; p < pages; p++)
			memset(heap + p * 4096, (int)(p * 31 % 251), 4096);
		printf("first %d\n", SetBreakpoint(1, 1, 1, 0, "mode=tight"));
		for (size_t p = 0; p < pages; p += 10)
			heap[p * 4096 + 1] ^= 0xff;
		printf("second %d\n", SetBreakpoint(1, 1, 2, 0, "mode=tight"));
		for (size_t p = 0; p < pages; p++)
			sum += heap[p * 4096] + 3u * heap[p * 4096 + 1] + heap[p * 4096 + 4095];
		printf("sum %lu\n", sum);
		return 0;
	}
	if (!strcmp(mode, "grow") && argc == 4) {
		size_t first = (size_t)atol(argv[2]) << 20, more = (size_t)atol(argv[3]) << 20;
		unsigned char *heap = malloc(first), *grown;
		unsigned long sum = 0;
		if (!heap)
			return 3;
		memset(heap, 1, first);
		printf("first %d\n", SetBreakpoint(1, 1, 1, 0, "mode=grow"));
		heap[5] = 2;
		printf("second %d\n", SetBreakpoint(1, 1, 2, 0, "mode=grow"));
		fflush(stdout);
		sleep(1);
		grown = malloc(more);
		if (!grown)
			return 3;
		memset(grown, 3, more);
		printf("third %d\n", SetBreakpoint(1, 1, 3, 0, "mode=grow"));
		for (size_t i = 0; i < first; i += 4096)
			sum += heap[i];
		for (size_t i = 0; i < more; i += 4096)
			sum += grown[i];
		printf("sum %lu\n", sum);
		return 0;
	}
	if (!strcmp(mode, "alarm") && argc == 3)
		return wait_for_alarm(argv[2]);
	if (!strcmp(mode, "limits"))
		return own_limits();
	if (!strcmp(mode, "tmpfile"))
		return deleted_files();
	if (!strcmp(mode, "ids"))
		return own_ids();
	if (!strcmp(mode, "umask"))
		return own_umask();
	if (!strcmp(mode, "personality")) {
		SetBreakpoint(1, 1, 1, 0, "mode=personality");
		printf("personality %x\n", personality(0xffffffff));
		return 0;
	}
	if (!strcmp(mode, "sched"))
		return own_scheduling();
	if (!strcmp(mode, "altstack"))
		return own_signal_stacks();
	if (!strcmp(mode, "altstack-sandboxed"))
		return sandboxed_signal_stack();
	if (!strcmp(mode, "tight-stack"))
		return tight_signal_stack();
	if (!strcmp(mode, "shared"))
		return sparse_shared();
	if (!strcmp(mode, "huge"))
		return private_huge_pages();
	if (!strcmp(mode, "gone") && argc > 2)
		return gone_file(argv[2], argc > 3 && !strcmp(argv[3], "keep"));
	if (!strcmp(mode, "views"))
		return two_views(argc > 2 && !strcmp(argv[2], "closed"));
	if (!strcmp(mode, "fds") && argc == 3)
		return many_descriptors(argv[0], atoi(argv[2]));
	fprintf(stderr, "usage: behave echo|exit N|signals|segv|abort-thread|wait-term|fork|big MB|leader-exits|exec|vfork-stuck|alarm HOW|limits|tmpfile|shared|huge|views [closed]|gone PATH [keep]|ids|umask|personality|sched|altstack|altstack-sandboxed|tight-stack|fds N\n");
	return 2;
}
