/*
 * No SetBreakpoint: library functions for `sdt run --break`. Two threads call libm's
 * cbrt() 50 times each; then the program opens the library named by its argument
 * (tests/programs/loaded.c), calls its plugin_step() twice, closes it (unloading it),
 * opens it again and calls plugin_step() twice more. Last it forks a child that calls
 * cbrt() once and exits with what it got. Deterministic: prints
 * "roots R steps S child exited C".
 *   usage: loads LIBRARY
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define CALLS 50

static double roots[2];

static void *work(void *arg)
{
	long w = (long)arg;
	for (int i = 0; i < CALLS; i++)
		roots[w] += cbrt((double)(2 * i + w));
	return NULL;
}

/* Two steps of the library at `path`, loaded for them and unloaded after. */
static long steps(const char *path, long x)
{
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		fprintf(stderr, "loads: %s\n", dlerror());
		exit(2);
	}
	long (*step)(long) = (long (*)(long))dlsym(lib, "plugin_step");
	if (step == NULL) {
		fprintf(stderr, "loads: %s\n", dlerror());
		exit(2);
	}
	x = step(step(x));
	dlclose(lib);
	return x;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: loads LIBRARY\n");
		return 2;
	}
	pthread_t t[2];
	for (long w = 0; w < 2; w++)
		pthread_create(&t[w], NULL, work, (void *)w);
	for (int w = 0; w < 2; w++)
		pthread_join(t[w], NULL);
	long x = steps(argv[1], 1);
	x = steps(argv[1], x);
	pid_t child = fork();
	if (child == 0)
		_exit((int)cbrt((double)x));
	int status = 0;
	waitpid(child, &status, 0);
	printf("roots %.6f steps %ld child %s %d\n", roots[0] + roots[1], x,
	       WIFEXITED(status) ? "exited" : "killed by signal",
	       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	return 0;
}
