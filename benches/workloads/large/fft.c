/*
 * Complex FFT of n = 2^m points by the six-step method, as SPLASH-2's FFT does it: the
 * data seen as an n1 x n2 matrix, a transpose, row FFTs of length n1 and a twiddle pass,
 * a transpose, row FFTs of length n2, and a transpose into natural order. Each thread
 * owns a band of rows; the transposes read every band (all-to-all), with a barrier
 * between steps. The run is a forward and an inverse transform; each step writes the
 * whole data or the whole scratch array (2 x 16 bytes x n: 512 MiB at 2^24 points).
 *
 * Check: two bins of the forward transform against the direct sum, and after the
 * inverse the data equals the input (regenerated from its formula) to rounding.
 *
 *   usage: fft THREADS [M]      (n = 2^M points, default M = 24: 512 MiB)
 */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "../bit_reverse.h"
#include "large.h"

static int m;
static long n, n1, n2;
static double complex *x, *scratch;
static double complex *roots_hi, *roots_lo, *roots1, *roots2; /* see root() */
static const long probe_bins[2] = { 1, 12345 };
static double complex probe[2];

static double complex input(long k)
{
	return hash01(2 * k) - 0.5 + I * (hash01(2 * k + 1) - 0.5);
}

/* w^e with w = exp(-2 pi i / n), from two small tables: w^e = w^(hi * n2) * w^lo. */
static double complex root(long e)
{
	e &= n - 1;
	return roots_hi[e / n2] * roots_lo[e % n2];
}

/* dst (cols x rows) = transpose of src (rows x cols), for dst rows [lo, hi). */
static void transpose(double complex *dst, const double complex *src, long rows, long cols,
		      long lo, long hi, double scale)
{
	const long tile = 16;
	for (long i0 = lo; i0 < hi; i0 += tile)
		for (long j0 = 0; j0 < rows; j0 += tile)
			for (long i = i0; i < i0 + tile && i < hi; i++)
				for (long j = j0; j < j0 + tile && j < rows; j++)
					dst[i * rows + j] = scale * src[j * cols + i];
}

/* In-place radix-2 FFT of a[0..len), roots[k] = exp(-2 pi i k / len); inverse: conjugates. */
static void fft_row(double complex *a, long len, const double complex *roots, int inverse)
{
	bit_reverse(a, len);
	for (long half = 1; half < len; half <<= 1)
		for (long i = 0; i < len; i += 2 * half)
			for (long k = 0; k < half; k++) {
				double complex w = roots[k * (len / (2 * half))];
				double complex v = a[i + k + half] * (inverse ? conj(w) : w);
				a[i + k + half] = a[i + k] - v;
				a[i + k] += v;
			}
}

/* x = FFT(x) (inverse: the inverse FFT, scaled by 1/n), through scratch. */
static void transform(int t, int inverse)
{
	long lo, hi;
	band(n2, t, &lo, &hi);
	transpose(scratch, x, n1, n2, lo, hi, 1);
	for (long j2 = lo; j2 < hi; j2++) {
		double complex *row = &scratch[j2 * n1];
		fft_row(row, n1, roots1, inverse);
		for (long k1 = 0; k1 < n1; k1++)
			row[k1] *= inverse ? conj(root(j2 * k1)) : root(j2 * k1);
	}
	pthread_barrier_wait(&barrier);
	band(n1, t, &lo, &hi);
	transpose(x, scratch, n2, n1, lo, hi, 1);
	for (long k1 = lo; k1 < hi; k1++)
		fft_row(&x[k1 * n2], n2, roots2, inverse);
	pthread_barrier_wait(&barrier);
	band(n2, t, &lo, &hi);
	transpose(scratch, x, n1, n2, lo, hi, inverse ? 1.0 / n : 1);
	pthread_barrier_wait(&barrier);
	memcpy(&x[lo * n1], &scratch[lo * n1], (hi - lo) * n1 * sizeof *x);
	pthread_barrier_wait(&barrier);
}

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	long lo, hi;
	band(n, t, &lo, &hi);
	for (long k = lo; k < hi; k++)
		x[k] = input(k);
	pthread_barrier_wait(&barrier);
	transform(t, 0);
	if (t == 0)
		for (int b = 0; b < 2; b++)
			probe[b] = x[probe_bins[b] % n];
	pthread_barrier_wait(&barrier);
	transform(t, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	m = large_args(argc, argv, 24, 4);
	n = 1L << m, n1 = 1L << (m / 2), n2 = n / n1;
	x = xmalloc(n * sizeof *x), scratch = xmalloc(n * sizeof *x);
	roots_hi = xmalloc(n1 * sizeof *x), roots_lo = xmalloc(n2 * sizeof *x);
	roots1 = xmalloc(n1 * sizeof *x), roots2 = xmalloc(n2 * sizeof *x);
	for (long k = 0; k < n1; k++)
		roots_hi[k] = cexp(-2 * M_PI * I * (double)(k * n2) / n);
	for (long k = 0; k < n2; k++)
		roots_lo[k] = cexp(-2 * M_PI * I * (double)k / n);
	for (long k = 0; k < n1; k++)
		roots1[k] = root(k * n2);
	for (long k = 0; k < n2; k++)
		roots2[k] = root(k * n1);
	run_threads(worker);

	double bin_err = 0;
	for (int b = 0; b < 2; b++) {
		long bin = probe_bins[b] % n;
		double complex direct = 0;
		for (long j = 0; j < n; j++)
			direct += input(j) * root(j * bin);
		bin_err = fmax(bin_err, cabs(direct - probe[b]));
	}
	double trip = 0;
	for (long k = 0; k < n; k++)
		trip = fmax(trip, cabs(x[k] - input(k)));
	char what[64], check[96];
	snprintf(what, sizeof what, "2^%d points forward and back", m);
	snprintf(check, sizeof check, "bin error %.1e, round-trip error %.1e", bin_err, trip);
	return finish("fft", what, 2.0 * n * sizeof *x, check,
		      bin_err < 1e-8 * sqrt((double)n) && trip < 1e-12);
}
