/*
 * A process to checkpoint and restore (CRIU, in the QEMU guest): counts up every 100 ms
 * and after each tick writes "<count> pid=<pid>" over the start of FILE, until TICKS ticks
 * (0, the default: forever). At tick 10 it passes one breakpoint, so that `sdt run` can
 * snapshot it mid-count; outside `sdt run` that costs nothing.
 *   usage: counter FILE [TICKS]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <sdt.h>

unsigned long count;

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: counter FILE [TICKS]\n");
		return 2;
	}
	unsigned long ticks = argc > 2 ? strtoul(argv[2], NULL, 10) : 0;
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	struct timespec tick = { 0, 100 * 1000 * 1000 };
	int snapshot = SDT_OFF;
	while (ticks == 0 || count < ticks) {
		char line[64];
		int len = snprintf(line, sizeof(line), "%lu pid=%d\n", ++count, (int)getpid());
		if (pwrite(fd, line, len, 0) != len) {
			perror("pwrite");
			return 1;
		}
		if (count == 10)
			snapshot = SetBreakpoint(1, 1, 1, 0, "test=counter");
		nanosleep(&tick, NULL);
	}
	printf("counted to %lu (snapshot %d)\n", count, snapshot);
	return 0;
}
