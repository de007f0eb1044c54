/*
 * Blocked dense LU factorization, the shape of SPLASH-2's LU (contiguous blocks): an
 * n x n matrix in B x B blocks, each block contiguous in memory, blocks dealt to threads
 * by a two-dimensional scatter. Step K factors the diagonal block, then the blocks of row
 * and column K, then updates the trailing matrix, with a barrier between the three.
 * No pivoting: the matrix is diagonally dominant, as in SPLASH-2. The part of the matrix
 * still written shrinks with every step.
 *
 * Self-check: solve A x = b, b being A's row sums, with the factors: x must be all ones,
 * and the residual |A x - b| / (|A| |x|) must be at rounding level (A regenerated).
 *
 *   usage: lu THREADS [small|default|large]
 */
#include <math.h>

#include "paper.h"

#define B 32

static int nthreads, grid_rows, grid_cols;
static long n, nb;			/* nb blocks per row */
static double *blocks;
static pthread_barrier_t barrier;

static double *block(long bi, long bj) { return blocks + (bi * nb + bj) * B * B; }
static double *at(long i, long j) { return block(i / B, j / B) + (i % B) * B + j % B; }

static int owner(long bi, long bj) { return (int)((bi % grid_rows) * grid_cols + bj % grid_cols); }

static double element(long i, long j)
{
	unsigned long long s = paper_seed((unsigned long long)i * 1000003 + j);
	return paper_uniform(&s) - 0.5 + (i == j ? (double)n : 0.0);
}

static void factor_diagonal(double *a)
{
	for (int k = 0; k < B; k++)
		for (int i = k + 1; i < B; i++) {
			a[i * B + k] /= a[k * B + k];
			for (int j = k + 1; j < B; j++)
				a[i * B + j] -= a[i * B + k] * a[k * B + j];
		}
}

/* a = L^-1 a, L the unit lower triangle of d (a block of row K). */
static void solve_lower(const double *d, double *a)
{
	for (int k = 0; k < B; k++)
		for (int i = k + 1; i < B; i++)
			for (int j = 0; j < B; j++)
				a[i * B + j] -= d[i * B + k] * a[k * B + j];
}

/* a = a U^-1, U the upper triangle of d (a block of column K). */
static void solve_upper(const double *d, double *a)
{
	for (int i = 0; i < B; i++)
		for (int k = 0; k < B; k++) {
			a[i * B + k] /= d[k * B + k];
			for (int j = k + 1; j < B; j++)
				a[i * B + j] -= a[i * B + k] * d[k * B + j];
		}
}

/* c -= a b */
static void update(double *c, const double *a, const double *b)
{
	for (int i = 0; i < B; i++)
		for (int k = 0; k < B; k++) {
			double aik = a[i * B + k];
			for (int j = 0; j < B; j++)
				c[i * B + j] -= aik * b[k * B + j];
		}
}

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	for (long K = 0; K < nb; K++) {
		double left = (double)(nb - K) / nb;
		paper_progress(1.0 - left * left * left, "factor");
		if (owner(K, K) == t)
			factor_diagonal(block(K, K));
		pthread_barrier_wait(&barrier);
		for (long J = K + 1; J < nb; J++) {
			if (owner(K, J) == t)
				solve_lower(block(K, K), block(K, J));
			if (owner(J, K) == t)
				solve_upper(block(K, K), block(J, K));
		}
		pthread_barrier_wait(&barrier);
		for (long I = K + 1; I < nb; I++)
			for (long J = K + 1; J < nb; J++)
				if (owner(I, J) == t)
					update(block(I, J), block(I, K), block(K, J));
		pthread_barrier_wait(&barrier);
	}
	paper_progress_end("factor");
	return NULL;
}

int main(int argc, char **argv)
{
	enum paper_size size;
	paper_args(argc, argv, "lu", &nthreads, &size);
	n = PAPER_BY_SIZE(size, 256, 2048, 4096);
	nb = n / B;
	/* The most square grid of threads: 2 -> 1x2, 4 -> 2x2, 8 -> 2x4. */
	for (grid_rows = (int)sqrt((double)nthreads); nthreads % grid_rows; grid_rows--)
		;
	grid_cols = nthreads / grid_rows;
	blocks = malloc(n * n * sizeof *blocks);
	double *rhs = malloc(n * sizeof *rhs), *x = malloc(n * sizeof *x);
	for (long i = 0; i < n; i++) {
		rhs[i] = 0;
		for (long j = 0; j < n; j++)
			rhs[i] += (*at(i, j) = element(i, j));
	}

	pthread_barrier_init(&barrier, NULL, nthreads);
	paper_roi(nthreads, worker);

	/* L y = b, then U x = y. */
	for (long i = 0; i < n; i++) {
		x[i] = rhs[i];
		for (long j = 0; j < i; j++)
			x[i] -= *at(i, j) * x[j];
	}
	for (long i = n - 1; i >= 0; i--) {
		for (long j = i + 1; j < n; j++)
			x[i] -= *at(i, j) * x[j];
		x[i] /= *at(i, i);
	}
	double err = 0, residual = 0, norm_a = 0, norm_x = 0;
	for (long i = 0; i < n; i++) {
		double row = 0, ax = 0;
		for (long j = 0; j < n; j++) {
			double a = element(i, j);
			row += fabs(a), ax += a * x[j];
		}
		norm_a = fmax(norm_a, row), norm_x = fmax(norm_x, fabs(x[i]));
		residual = fmax(residual, fabs(ax - rhs[i]));
		err = fmax(err, fabs(x[i] - 1.0));
	}
	double scaled = residual / (norm_a * norm_x);
	paper_check(err < 1e-9, "%ld x %ld system solved with the factors: x is all ones to %.2e", n, n, err);
	paper_check(scaled < 1e-13, "scaled residual |Ax - b| / (|A| |x|) = %.2e", scaled);
	return paper_finish();
}
