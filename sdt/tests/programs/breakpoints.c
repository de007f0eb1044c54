/*
 * Runs a list of breakpoints, given on the command line, on N threads, R times.
 *   usage: breakpoints THREADS REPEAT LEVEL/CLASS/ID/MULTIPLE_MARK[/ATTRS] ...
 * Each thread waits at a barrier before each repetition, so all threads arrive at every
 * breakpoint. Prints one line per captured breakpoint, "captured L/C/I -> S<n>", and one
 * per declined one, "declined L/C/I"; at the end "declining inline" if sdt switched the
 * library's state word to declining (no more snapshots), then "done".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sdt.h>

struct bp {
	int level, class_, id, multiple_mark;
	const char *attrs;
};

static struct bp *bps;
static int nbps, repeat;
static pthread_barrier_t barrier;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

static void *run(void *arg)
{
	(void)arg;
	for (int r = 0; r < repeat; r++) {
		pthread_barrier_wait(&barrier);
		for (int i = 0; i < nbps; i++) {
			struct bp *b = &bps[i];
			int n = SetBreakpoint(b->level, b->class_, b->id, b->multiple_mark, b->attrs);
			if (n >= 0) {
				pthread_mutex_lock(&out);
				printf("captured %d/%d/%d -> S%d\n", b->level, b->class_, b->id, n);
				pthread_mutex_unlock(&out);
			} else if (n == SDT_DECLINED) {
				pthread_mutex_lock(&out);
				printf("declined %d/%d/%d\n", b->level, b->class_, b->id);
				pthread_mutex_unlock(&out);
			}
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: breakpoints THREADS REPEAT L/C/I/MM[/ATTRS] ...\n");
		return 2;
	}
	int nthreads = atoi(argv[1]);
	repeat = atoi(argv[2]);
	nbps = argc - 3;
	bps = calloc(nbps, sizeof(*bps));
	for (int i = 0; i < nbps; i++) {
		char *spec = strdup(argv[3 + i]);
		char *attrs = NULL;
		char *p = spec;
		for (int slash = 0; *p; p++)
			if (*p == '/' && ++slash == 4) {
				*p = 0;
				attrs = p + 1;
				break;
			}
		if (sscanf(spec, "%d/%d/%d/%d", &bps[i].level, &bps[i].class_, &bps[i].id,
			   &bps[i].multiple_mark) != 4) {
			fprintf(stderr, "bad breakpoint %s\n", argv[3 + i]);
			return 2;
		}
		bps[i].attrs = attrs ? attrs : "";
	}
	pthread_barrier_init(&barrier, NULL, nthreads);
	pthread_t *threads = calloc(nthreads, sizeof(*threads));
	for (int i = 0; i < nthreads; i++)
		pthread_create(&threads[i], NULL, run, NULL);
	for (int i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	if (__atomic_load_n(&sdt_state, __ATOMIC_ACQUIRE) < 0)
		printf("declining inline\n");
	printf("done\n");
	return 0;
}
