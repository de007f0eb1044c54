/*
 * Opens the library named by its argument (tests/programs/loaded.c) and steps a local
 * through its plugin_step(), a breakpoint after each step, while the library is loaded.
 * Prints "step N x X" before breakpoint N: X is what gdb must show as `x`, a local of
 * main, in snapshot S(N-1).
 *   usage: plugin LIBRARY
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "sdt.h"

#define STEPS 2

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: plugin LIBRARY\n");
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		fprintf(stderr, "plugin: %s\n", dlerror());
		return 2;
	}
	long (*step)(long) = (long (*)(long))dlsym(lib, "plugin_step");
	if (step == NULL) {
		fprintf(stderr, "plugin: %s\n", dlerror());
		return 2;
	}
	long x = 5;
	for (int i = 1; i <= STEPS; i++) {
		x = step(x);
		printf("step %d x %ld\n", i, x);
		fflush(stdout);
		SetBreakpoint(1, 1, 1, 1, "");
	}
	dlclose(lib);
	return 0;
}
