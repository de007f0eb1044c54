/*
 * An ocean-like grid computation, after SPLASH-2's Ocean: on an n x n grid (the outer
 * ring is the boundary), time steps that each
 *
 *   - compute the right-hand side from the vorticity q and the wind forcing,
 *   - solve the Poisson equation  laplacian(psi) = rhs  by red-black successive
 *     over-relaxation, from the previous step's psi,
 *   - advance q from psi (damping plus the stream function's curvature),
 *
 * each thread owning a band of rows, with a barrier after every sweep. Every step
 * rewrites the three grids (3 x 8 n^2 bytes: 96 MiB at n = 2050).
 *
 * Check: the residual of every step's solve ends below where it started, and stays finite.
 *
 *   usage: ocean THREADS [N]      (default 2050)
 */
#include <math.h>

#include "large.h"

#define STEPS 6
#define SWEEPS 16 /* red-black iterations per solve */
#define OMEGA 1.5

static long n;
static double *psi, *q, *rhs;
static double residual[2][256]; /* per thread: before and after the solve */
static int all_ok = 1;
static double last_before, last_after;

#define AT(g, i, j) ((g)[(i) * n + (j)])

/* One half-sweep of SOR over the points of one colour ((i + j) % 2 == colour). */
static void sor(int colour, long lo, long hi)
{
	for (long i = lo; i < hi; i++)
		for (long j = 1 + (i + colour + 1) % 2; j < n - 1; j += 2) {
			double gs = 0.25 * (AT(psi, i - 1, j) + AT(psi, i + 1, j) + AT(psi, i, j - 1) +
					    AT(psi, i, j + 1) - AT(rhs, i, j));
			AT(psi, i, j) += OMEGA * (gs - AT(psi, i, j));
		}
}

/* Sum of squared residuals of laplacian(psi) = rhs over rows [lo, hi) (unit spacing). */
static double residual_sq(long lo, long hi)
{
	double sum = 0;
	for (long i = lo; i < hi; i++)
		for (long j = 1; j < n - 1; j++) {
			double r = AT(psi, i - 1, j) + AT(psi, i + 1, j) + AT(psi, i, j - 1) +
				   AT(psi, i, j + 1) - 4 * AT(psi, i, j) - AT(rhs, i, j);
			sum += r * r;
		}
	return sum;
}

/* The sum of every thread's entry of residual[which], as a norm. */
static double total_residual(int which)
{
	double sum = 0;
	for (int t = 0; t < nthreads; t++)
		sum += residual[which][t];
	return sqrt(sum);
}

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	long lo, hi;
	band(n - 2, t, &lo, &hi);
	lo++, hi++; /* interior rows */
	for (long i = lo - (t == 0); i < hi + (t == nthreads - 1); i++)
		for (long j = 0; j < n; j++) {
			int edge = i == 0 || i == n - 1 || j == 0 || j == n - 1;
			AT(psi, i, j) = 0;
			AT(q, i, j) = edge ? 0 : hash01(i * n + j) - 0.5;
		}
	for (int step = 0; step < STEPS; step++) {
		pthread_barrier_wait(&barrier);
		for (long i = lo; i < hi; i++) {
			double wind = 1e-3 * sin(M_PI * i / (n - 1));
			for (long j = 1; j < n - 1; j++)
				AT(rhs, i, j) = AT(q, i, j) - wind;
		}
		pthread_barrier_wait(&barrier);
		residual[0][t] = residual_sq(lo, hi);
		for (int sweep = 0; sweep < SWEEPS; sweep++) {
			pthread_barrier_wait(&barrier);
			sor(0, lo, hi);
			pthread_barrier_wait(&barrier);
			sor(1, lo, hi);
		}
		pthread_barrier_wait(&barrier);
		residual[1][t] = residual_sq(lo, hi);
		for (long i = lo; i < hi; i++)
			for (long j = 1; j < n - 1; j++)
				AT(q, i, j) = 0.9 * AT(q, i, j) + 0.01 * (AT(psi, i, j) - AT(rhs, i, j));
		pthread_barrier_wait(&barrier);
		if (t == 0) {
			last_before = total_residual(0), last_after = total_residual(1);
			all_ok &= isfinite(last_after) && last_after < last_before;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	n = large_args(argc, argv, 2050, 4);
	psi = xmalloc(n * n * sizeof *psi), q = xmalloc(n * n * sizeof *q);
	rhs = xmalloc(n * n * sizeof *rhs);
	run_threads(worker);

	char what[64], check[96];
	snprintf(what, sizeof what, "%ldx%ld grid, %d steps of %d SOR sweeps", n, n, STEPS, SWEEPS);
	snprintf(check, sizeof check, "last solve's residual %.3e from %.3e", last_after, last_before);
	return finish("ocean", what, 3.0 * n * n * sizeof *psi, check, all_ok);
}
