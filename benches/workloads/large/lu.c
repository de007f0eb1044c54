/*
 * Blocked LU factorization (no pivoting) of an n x n matrix, as SPLASH-2's LU does it:
 * B x B blocks, each stored contiguously, dealt to the threads round-robin by block
 * column. Step k factors the diagonal block, divides the blocks of row k and column k by
 * it, then updates every block of the trailing matrix, with a barrier between phases:
 * every step rewrites the whole trailing matrix (8 n^2 bytes: 72 MiB at n = 3072).
 *
 * The matrix is diagonally dominant, so no pivoting is needed. Check: a few rows of L U
 * against the same rows of the input (regenerated from its formula).
 *
 *   usage: lu THREADS [N]      (N a multiple of 32, default 3072)
 */
#include <math.h>

#include "large.h"

#define B 32

static long n, nb; /* nb = n / B blocks a side */
static double *a;

/* Block (bi, bj), B x B row-major. */
static double *block(long bi, long bj)
{
	return &a[(bi * nb + bj) * B * B];
}

static double input(long i, long j)
{
	return hash01(i * n + j) - 0.5 + (i == j ? n : 0);
}

static int owner(long bj)
{
	return bj % nthreads;
}

/* Factors a diagonal block in place: L (unit diagonal) below, U on and above. */
static void factor(double *d)
{
	for (int k = 0; k < B; k++)
		for (int i = k + 1; i < B; i++) {
			d[i * B + k] /= d[k * B + k];
			for (int j = k + 1; j < B; j++)
				d[i * B + j] -= d[i * B + k] * d[k * B + j];
		}
}

/* A block below the diagonal: c = c U^-1, U the upper triangle of d. */
static void divide_column(double *c, const double *d)
{
	for (int i = 0; i < B; i++)
		for (int k = 0; k < B; k++) {
			c[i * B + k] /= d[k * B + k];
			for (int j = k + 1; j < B; j++)
				c[i * B + j] -= c[i * B + k] * d[k * B + j];
		}
}

/* A block right of the diagonal: r = L^-1 r, L the unit lower triangle of d. */
static void divide_row(double *r, const double *d)
{
	for (int k = 0; k < B; k++)
		for (int i = k + 1; i < B; i++)
			for (int j = 0; j < B; j++)
				r[i * B + j] -= d[i * B + k] * r[k * B + j];
}

/* c -= l u. */
static void update(double *restrict c, const double *restrict l, const double *restrict u)
{
	for (int i = 0; i < B; i++)
		for (int k = 0; k < B; k++)
			for (int j = 0; j < B; j++)
				c[i * B + j] -= l[i * B + k] * u[k * B + j];
}

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	for (long bj = t; bj < nb; bj += nthreads)
		for (long bi = 0; bi < nb; bi++)
			for (long i = 0; i < B; i++)
				for (long j = 0; j < B; j++)
					block(bi, bj)[i * B + j] = input(bi * B + i, bj * B + j);
	for (long k = 0; k < nb; k++) {
		pthread_barrier_wait(&barrier);
		if (owner(k) == t)
			factor(block(k, k));
		pthread_barrier_wait(&barrier);
		for (long bj = k + 1; bj < nb; bj++)
			if (owner(bj) == t)
				divide_row(block(k, bj), block(k, k));
		if (owner(k) == t)
			for (long bi = k + 1; bi < nb; bi++)
				divide_column(block(bi, k), block(k, k));
		pthread_barrier_wait(&barrier);
		for (long bj = k + 1; bj < nb; bj++)
			if (owner(bj) == t)
				for (long bi = k + 1; bi < nb; bi++)
					update(block(bi, bj), block(bi, k), block(k, bj));
	}
	return NULL;
}

/* Entry (i, j) of the factored matrix. */
static double at(long i, long j)
{
	return block(i / B, j / B)[(i % B) * B + j % B];
}

int main(int argc, char **argv)
{
	n = large_args(argc, argv, 3072, B) / B * B;
	nb = n / B;
	a = xmalloc(n * n * sizeof *a);
	run_threads(worker);

	const long rows[4] = { 0, 1, n / 2 + 1, n - 1 };
	double err = 0;
	for (int r = 0; r < 4; r++)
		for (long j = 0; j < n; j++) {
			long i = rows[r];
			double lu = i <= j ? at(i, j) : 0; /* L's unit diagonal times U */
			for (long k = 0; k < i && k <= j; k++)
				lu += at(i, k) * at(k, j);
			err = fmax(err, fabs(lu - input(i, j)));
		}
	char what[64], check[64];
	snprintf(what, sizeof what, "%ldx%ld matrix in %dx%d blocks", n, n, B, B);
	snprintf(check, sizeof check, "largest error of 4 rows of LU %.1e", err);
	return finish("lu", what, (double)n * n * sizeof *a, check, err < 1e-9 * n);
}
