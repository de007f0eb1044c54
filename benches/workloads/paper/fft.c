/*
 * Radix-2 complex FFT by the six-step method, the shape of SPLASH-2's FFT: n = 2^m points
 * as a sqrt(n) x sqrt(n) matrix, each thread owning a band of rows; three transposes (all
 * threads read every band: all-to-all communication), two sets of row FFTs and a twiddle
 * pass, with a barrier between steps. Each iteration is a forward and an inverse
 * transform; every page of the data is written at every step.
 *
 * Self-check: eight output bins of the first forward transform against the direct sum
 * of the definition, and the round trip: after every forward and inverse transform the
 * data is the input again, to rounding.
 *
 *   usage: fft THREADS [small|default|large]
 */
#include <complex.h>
#include <math.h>

#include "../bit_reverse.h"
#include "paper.h"

static int nthreads, m, iterations;
static long n, rows;			/* n = rows * rows */
static double complex *x, *scratch, *input, *twiddle, *row_roots;
static double complex probe[8];
static const long probe_bins[8] = { 0, 1, 3, 17, 100, 1000, 4095, 12345 };
static pthread_barrier_t barrier;

/* dst[i][j] = src[j][i], for the rows this thread owns in dst. */
static void transpose(double complex *dst, const double complex *src, long r0, long r1)
{
	const long tile = 32;
	for (long i0 = r0; i0 < r1; i0 += tile)
		for (long j0 = 0; j0 < rows; j0 += tile)
			for (long i = i0; i < i0 + tile && i < r1; i++)
				for (long j = j0; j < j0 + tile; j++)
					dst[i * rows + j] = src[j * rows + i];
}

/* In-place iterative radix-2 FFT of one row (length `rows`), bit reversal first. */
static void fft_row(double complex *a)
{
	bit_reverse(a, rows);
	for (long len = 2; len <= rows; len <<= 1) {
		long stride = rows / len;
		for (long i = 0; i < rows; i += len)
			for (long k = 0; k < len / 2; k++) {
				double complex w = row_roots[k * stride];
				double complex u = a[i + k], v = a[i + k + len / 2] * w;
				a[i + k] = u + v;
				a[i + k + len / 2] = u - v;
			}
	}
}

/* One forward transform of x (by conjugation, the inverse), in place; 6 barriers. */
static void transform(int t, int inverse, int *step, int steps)
{
	long r0 = rows * t / nthreads, r1 = rows * (t + 1) / nthreads;
	paper_progress((double)(*step)++ / steps, inverse ? "inverse" : "forward");
	if (inverse)
		for (long i = r0 * rows; i < r1 * rows; i++)
			x[i] = conj(x[i]);
	pthread_barrier_wait(&barrier);
	transpose(scratch, x, r0, r1);
	pthread_barrier_wait(&barrier);
	paper_progress((double)(*step)++ / steps, inverse ? "inverse" : "forward");
	for (long i = r0; i < r1; i++) {
		fft_row(&scratch[i * rows]);
		for (long k = 0; k < rows; k++)
			scratch[i * rows + k] *= twiddle[(i * k) % n];
	}
	pthread_barrier_wait(&barrier);
	transpose(x, scratch, r0, r1);
	pthread_barrier_wait(&barrier);
	paper_progress((double)(*step)++ / steps, inverse ? "inverse" : "forward");
	for (long i = r0; i < r1; i++)
		fft_row(&x[i * rows]);
	pthread_barrier_wait(&barrier);
	transpose(scratch, x, r0, r1);
	pthread_barrier_wait(&barrier);
	for (long i = r0 * rows; i < r1 * rows; i++)
		x[i] = inverse ? conj(scratch[i]) / n : scratch[i];
	pthread_barrier_wait(&barrier);
}

static void *worker(void *arg)
{
	int t = (int)(long)arg, step = 0, steps = 6 * iterations;
	for (int it = 0; it < iterations; it++) {
		transform(t, 0, &step, steps);
		if (t == 0 && it == 0)
			for (int b = 0; b < 8; b++)
				probe[b] = x[probe_bins[b] % n];
		pthread_barrier_wait(&barrier);
		transform(t, 1, &step, steps);
	}
	paper_progress_end("inverse");
	return NULL;
}

int main(int argc, char **argv)
{
	enum paper_size size;
	paper_args(argc, argv, "fft", &nthreads, &size);
	m = PAPER_BY_SIZE(size, 14, 20, 22);
	iterations = PAPER_BY_SIZE(size, 2, 16, 8);
	n = 1L << m, rows = 1L << (m / 2);
	x = malloc(n * sizeof *x), scratch = malloc(n * sizeof *x), input = malloc(n * sizeof *x);
	twiddle = malloc(n * sizeof *x), row_roots = malloc(rows / 2 * sizeof *x);
	for (long k = 0; k < n; k++)
		twiddle[k] = cexp(-2 * M_PI * I * (double)k / n);
	for (long k = 0; k < rows / 2; k++)
		row_roots[k] = twiddle[k * rows];
	unsigned long long rng = paper_seed(4);
	for (long k = 0; k < n; k++)
		x[k] = input[k] = paper_uniform(&rng) - 0.5 + I * (paper_uniform(&rng) - 0.5);

	pthread_barrier_init(&barrier, NULL, nthreads);
	paper_roi(nthreads, worker);

	double bin_err = 0, scale = 0;
	for (int b = 0; b < 8; b++) {
		long k = probe_bins[b] % n;
		double complex direct = 0;
		for (long j = 0; j < n; j++)
			direct += input[j] * twiddle[(j * k) % n];
		bin_err = fmax(bin_err, cabs(direct - probe[b]));
		scale = fmax(scale, cabs(direct));
	}
	double trip = 0;
	for (long k = 0; k < n; k++)
		trip = fmax(trip, cabs(x[k] - input[k]));
	paper_check(bin_err < 1e-9 * (scale + sqrt((double)n)), "8 bins of the 2^%d-point transform against the direct sum: error %.2e", m, bin_err);
	paper_check(trip < 1e-12, "%d forward and inverse round trips: largest error %.2e", iterations, trip);
	return paper_finish();
}
