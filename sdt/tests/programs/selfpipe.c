/*
 * The self-pipe trick and an eventfd under an epoll instance, as event loops use them: at
 * each breakpoint the pipe holds two wakeup bytes and the eventfd a count; after the
 * breakpoint returns, the program asks the epoll instance which are ready (the tags it
 * registered them with) and reads them (the eventfd through a dup of it). It also holds
 * a timerfd, armed for an hour every hour, and a signalfd for SIGUSR1, which it raises
 * after each breakpoint and reads from there.
 *   usage: selfpipe [socket|thread]
 * With "socket", it also holds a socketpair, which a restore cannot make again; with
 * "thread", a second thread makes the rounds (its breakpoint's thread is not the first).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sdt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <unistd.h>

static int wake[2], counter, counter_dup, poll, timer, signals;

static void *rounds(void *unused);

int main(int argc, char **argv)
{
	int pair[2];
	if (pipe2(wake, O_NONBLOCK) < 0) {
		perror("pipe2");
		return 2;
	}
	counter = eventfd(0, EFD_NONBLOCK);
	counter_dup = dup(counter);
	poll = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event on_wake = { .events = EPOLLIN, .data.u64 = 10 };
	struct epoll_event on_count = { .events = EPOLLIN | EPOLLET, .data.u64 = 20 };
	if (epoll_ctl(poll, EPOLL_CTL_ADD, wake[0], &on_wake) || epoll_ctl(poll, EPOLL_CTL_ADD, counter, &on_count)) {
		perror("epoll_ctl");
		return 2;
	}
	if (argc > 1 && strcmp(argv[1], "socket") == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, pair) < 0) {
		perror("socketpair");
		return 2;
	}
	timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	struct itimerspec hourly = { .it_interval = { 3600, 0 }, .it_value = { 3600, 0 } };
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	signals = signalfd(-1, &usr1, SFD_CLOEXEC);
	if (timer < 0 || timerfd_settime(timer, 0, &hourly, NULL) || signals < 0) {
		perror("timerfd or signalfd");
		return 2;
	}
	if (argc > 1 && strcmp(argv[1], "thread") == 0) {
		pthread_t worker;
		void *failed;
		if (pthread_create(&worker, NULL, rounds, NULL) || pthread_join(worker, &failed))
			return 2;
		return failed != NULL;
	}
	return rounds(NULL) != NULL;
}

/* Three rounds; NULL when all went well. */
static void *rounds(void *unused)
{
	long total = 0;
	for (int round = 0; round < 3; round++) {
		uint64_t add = round + 5;
		if (write(wake[1], "ab", 2) != 2 || write(counter, &add, 8) != 8) {
			perror("write");
			return "write";
		}
		int snapshot = SetBreakpoint(1, 1, 1, 1, "");
		struct epoll_event ready[4];
		int n_ready = epoll_wait(poll, ready, 4, 0);
		long tags = 0;
		for (int i = 0; i < n_ready; i++)
			tags += ready[i].data.u64;
		char bytes[8];
		int n = read(wake[0], bytes, sizeof bytes);
		uint64_t count = 0;
		if (n < 0 || read(counter_dup, &count, 8) != 8) {
			perror("read");
			return "read";
		}
		total += n * 100 + count;
		struct itimerspec left;
		struct signalfd_siginfo got;
		if (timerfd_gettime(timer, &left) || raise(SIGUSR1) || read(signals, &got, sizeof got) != sizeof got) {
			perror("timer or signal");
			return "timer or signal";
		}
		int nonblocking = (fcntl(wake[0], F_GETFL) & O_NONBLOCK) && (fcntl(wake[1], F_GETFL) & O_NONBLOCK);
		printf("round %d snapshot %d ready %d (tags %ld) read '%.*s' count %lu total %ld timer %s every %lds "
		       "signal %u pipe %s\n",
		       round, snapshot, n_ready, tags, n, bytes, (unsigned long)count, total,
		       left.it_value.tv_sec > 3000 ? "armed" : "off", (long)left.it_interval.tv_sec, got.ssi_signo,
		       nonblocking ? "nonblocking" : "blocking");
		fflush(stdout); /* a resumed program must not print the lines before it again */
	}
	return NULL;
}
