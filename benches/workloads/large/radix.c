/*
 * Parallel radix sort of n 64-bit keys, as SPLASH-2's Radix does it: eight passes of one
 * 8-bit digit each, least significant first. In each pass every thread counts the digits
 * of its share of the keys, works out from all the counts where each of its keys goes,
 * and scatters them into the other array; barriers between the phases. Each pass
 * rewrites one of the two arrays (2 x 8 bytes x n: 256 MiB at 16M keys). The run sorts
 * ROUNDS sets of keys, one after the other.
 *
 * Check: after every sort the keys are in order, with the sum and xor of its input.
 *
 *   usage: radix THREADS [N]      (default 16777216 keys)
 */
#include "large.h"

#define ROUNDS 3
#define DIGIT_BITS 8
#define BUCKETS (1 << DIGIT_BITS)
#define PASSES (64 / DIGIT_BITS)

static long n;
static unsigned long long *keys, *other;
static long counts[256][BUCKETS];

/* What each thread found wrong with its share of the sorted keys, over every round. */
static struct {
	long disorder;
	unsigned long long sum, xor; /* of the input, less those of the output: 0 if kept */
} found[256];

/* One least-significant-digit pass: src to dst by the digit at `shift`. */
static void pass(int t, long lo, long hi, const unsigned long long *src, unsigned long long *dst,
		 int shift)
{
	long *mine = counts[t];
	for (int d = 0; d < BUCKETS; d++)
		mine[d] = 0;
	for (long i = lo; i < hi; i++)
		mine[(src[i] >> shift) % BUCKETS]++;
	pthread_barrier_wait(&barrier);
	/* Digit d of thread t goes after all smaller digits, and after digit d of the
	 * threads before t. */
	long next[BUCKETS], before = 0;
	for (int d = 0; d < BUCKETS; d++) {
		next[d] = before;
		for (int u = 0; u < nthreads; u++) {
			next[d] += u < t ? counts[u][d] : 0;
			before += counts[u][d];
		}
	}
	for (long i = lo; i < hi; i++)
		dst[next[(src[i] >> shift) % BUCKETS]++] = src[i];
	pthread_barrier_wait(&barrier);
}

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	long lo, hi;
	band(n, t, &lo, &hi);
	for (int round = 0; round < ROUNDS; round++) {
		for (long i = lo; i < hi; i++) {
			keys[i] = mix64(i + round * n);
			found[t].sum += keys[i], found[t].xor ^= keys[i];
		}
		pthread_barrier_wait(&barrier);
		/* An even number of passes leaves the sorted keys in `keys`. */
		for (int p = 0; p < PASSES; p += 2) {
			pass(t, lo, hi, keys, other, p * DIGIT_BITS);
			pass(t, lo, hi, other, keys, (p + 1) * DIGIT_BITS);
		}
		for (long i = lo; i < hi; i++) {
			found[t].disorder += i > 0 && keys[i - 1] > keys[i];
			found[t].sum -= keys[i], found[t].xor ^= keys[i];
		}
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	n = large_args(argc, argv, 16L << 20, 1);
	keys = xmalloc(n * sizeof *keys), other = xmalloc(n * sizeof *keys);
	run_threads(worker);

	long disorder = 0;
	unsigned long long sum = 0, xor = 0;
	for (int t = 0; t < nthreads; t++)
		disorder += found[t].disorder, sum += found[t].sum, xor ^= found[t].xor;
	char what[80], check[96];
	snprintf(what, sizeof what, "%d x %ld 64-bit keys, %d passes of %d bits", ROUNDS, n, PASSES,
		 DIGIT_BITS);
	snprintf(check, sizeof check, "%ld keys out of order, sum and xor %s", disorder,
		 sum == 0 && xor == 0 ? "kept" : "changed");
	return finish("radix", what, 2.0 * n * sizeof *keys, check,
		      disorder == 0 && sum == 0 && xor == 0);
}
