/*
 * What a program's open descriptors cost a capture: a server holds one per connection,
 * and each capture reads the whole table (what a restore needs of each) while the
 * program is stopped. It opens N descriptors of /dev/null, then reaches 5 breakpoints
 * (level 1, class 1, id 1) 10 ms apart; `sdt ls` gives each one's pause. With `files`,
 * every other descriptor is of a regular file (its own program), which each capture
 * looks up again (its size and time are recorded): a server's log and data files.
 *
 *   gcc -O2 -I sdt-lib/include benches/workloads/many_fds.c \
 *       target/release/libsdt.a -ldl -lm -lpthread -o /tmp/many_fds
 *   for n in 10 1000 10000; do rm -rf /tmp/fds.sdt; \
 *       sdt run -q --store /tmp/fds.sdt -- /tmp/many_fds $n; sdt ls --store /tmp/fds.sdt; done
 *
 *   usage: many_fds N [files]
 */
#include <fcntl.h>
#include <sdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	int files = argc > 2 && !strcmp(argv[2], "files");
	struct rlimit limit = { n + 100, n + 100 };
	if (setrlimit(RLIMIT_NOFILE, &limit) < 0) {
		perror("setrlimit (more than the hard limit needs root)");
		return 2;
	}
	for (int i = 0; i < n; i++) {
		if (open(files && i % 2 ? argv[0] : "/dev/null", O_RDONLY) < 0) {
			perror("open");
			return 2;
		}
	}
	for (int k = 0; k < 5; k++) {
		(void)SetBreakpoint(1, 1, 1, 1, "");
		usleep(10000);
	}
	return 0;
}
