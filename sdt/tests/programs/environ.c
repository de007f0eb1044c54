/*
 * Reads its environment after a breakpoint: what `sdt restore S0 -- NAME=VALUE` adds or
 * replaces is what the resumed program's getenv sees, and setenv on top of it works.
 *
 *   usage: environ NAME...
 *
 * Prints NAME=VALUE (or NAME unset) for each NAME, then sets SDT_TEST_SET=set and
 * prints it back, and the number of variables in environ.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <sdt.h>

extern char **environ;

int main(int argc, char **argv)
{
	SetBreakpoint(1, 1, 1, 0, "where=before-getenv");
	for (int i = 1; i < argc; i++) {
		const char *value = getenv(argv[i]);
		if (value)
			printf("%s=%s\n", argv[i], value);
		else
			printf("%s unset\n", argv[i]);
	}
	if (setenv("SDT_TEST_SET", "set", 1) != 0)
		return 1;
	printf("SDT_TEST_SET=%s\n", getenv("SDT_TEST_SET"));
	int n = 0;
	while (environ[n])
		n++;
	printf("entries %d\n", n);
	return 0;
}
