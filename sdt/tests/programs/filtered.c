/*
 * Proves that a filtered-out breakpoint makes no system call: after the first breakpoint
 * (which sets the library up), the program enters seccomp strict mode, where any system
 * call but read, write, _exit and sigreturn kills it, and runs N breakpoints that the
 * config filters out.
 *   usage: filtered N     (run with a config that filters level 2)
 */
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sdt.h>

static void say(const char *text, long value)
{
	char line[64];
	int len = snprintf(line, sizeof(line), "%s %ld\n", text, value);
	if (write(1, line, len) != len)
		syscall(SYS_exit, 3);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	say("first", SetBreakpoint(1, 1, 1, 0, "phase=init"));
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) {
		perror("prctl(PR_SET_SECCOMP)");
		return 2;
	}
	long filtered = 0;
	for (long i = 0; i < n; i++)
		if (SetBreakpoint(2, 1, 2, 1, "phase=loop") == SDT_FILTERED)
			filtered++;
	say("filtered", filtered);
	syscall(SYS_exit, 0);
	return 0;
}
