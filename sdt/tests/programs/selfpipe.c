/*
 * The self-pipe trick and an eventfd, as event loops use them: at each breakpoint the
 * pipe holds two wakeup bytes and the eventfd a count, which the program reads (the
 * eventfd through a dup of it) after the breakpoint returns.
 *   usage: selfpipe [socket]
 * With "socket", it also holds a socketpair, which a restore cannot make again.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sdt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int wake[2], pair[2];
	if (pipe2(wake, O_NONBLOCK) < 0) {
		perror("pipe2");
		return 2;
	}
	int counter = eventfd(0, EFD_NONBLOCK);
	int counter_dup = dup(counter);
	if (argc > 1 && strcmp(argv[1], "socket") == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, pair) < 0) {
		perror("socketpair");
		return 2;
	}
	long total = 0;
	for (int round = 0; round < 3; round++) {
		uint64_t add = round + 5;
		if (write(wake[1], "ab", 2) != 2 || write(counter, &add, 8) != 8) {
			perror("write");
			return 2;
		}
		int snapshot = SetBreakpoint(1, 1, 1, 1, "");
		char bytes[8];
		int n = read(wake[0], bytes, sizeof bytes);
		uint64_t count = 0;
		if (n < 0 || read(counter_dup, &count, 8) != 8) {
			perror("read");
			return 1;
		}
		total += n * 100 + count;
		printf("round %d snapshot %d read '%.*s' count %lu total %ld\n", round, snapshot, n, bytes,
		       (unsigned long)count, total);
		fflush(stdout); /* a resumed program must not print the lines before it again */
	}
	return 0;
}
