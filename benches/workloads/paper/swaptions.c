/*
 * Monte Carlo swaption pricing in a three-factor Heath-Jarrow-Morton model, the shape of
 * PARSEC's swaptions: independent tasks (one swaption each, its own random stream), a
 * small working set per thread, all compute. Each thread prices a contiguous block of
 * swaptions, as PARSEC deals them out.
 *
 * The model is discrete and arbitrage-free by construction: log discount-bond prices
 * move by Gaussian factor shocks whose drift makes every bond, divided by the rolled-over
 * money-market account, a martingale.
 *
 * Self-check: a payer minus a receiver swaption is the underlying swap, whose price the
 * initial curve gives exactly: for every swaption the Monte Carlo mean of the discounted
 * swap must lie within five standard errors of it (a wrong roll or discount misses by
 * a hundred and more, a missing drift by a dozen at the default size). With the
 * volatilities set to zero the paths are the forward curve and a payer swaption is
 * worth exactly max(swap, 0).
 *
 *   usage: swaptions THREADS [small|default|large]
 */
#include <math.h>

#include "paper.h"

#define DT 0.25			/* a quarter of a year: time step and payment period */
#define MAX_STEPS 48
#define FACTORS 3
#define BLOCK 512		/* trials between progress reports */

struct swaption {
	int expiry, tenor;	/* in steps */
	double strike;
	double payer, receiver, swap_mean, swap_se, swap_exact;
};

static struct swaption *swaptions;
static int nthreads, n_swaptions;
static long trials;
/* Bond volatility of each factor by time to maturity (in steps), and the drift term. */
static double bond_vol[FACTORS][MAX_STEPS + 1], drift[MAX_STEPS + 1];

static double initial_log_bond(int steps)
{
	/* Forward rate f(t) = 3% + 1% (1 - e^(-t/3)); log P(0,t) = -integral of f. */
	double t = steps * DT;
	return -(0.04 * t - 0.01 * 3.0 * (1.0 - exp(-t / 3.0)));
}

static void set_volatility(double scale)
{
	for (int tau = 0; tau <= MAX_STEPS; tau++) {
		double t = tau * DT;
		bond_vol[0][tau] = scale * 0.008 * t;
		bond_vol[1][tau] = scale * 0.010 * (1.0 - exp(-0.5 * t)) / 0.5;
		bond_vol[2][tau] = scale * 0.005 * t * exp(-0.3 * t);
		drift[tau] = 0;
		for (int k = 0; k < FACTORS; k++)
			drift[tau] += 0.5 * bond_vol[k][tau] * bond_vol[k][tau] * DT;
	}
}

/* The swap's value at expiry for notional 1: 1 - P(T0,Tn) - K delta sum P(T0,Ti). */
static double swap_value(const double *log_bond, const struct swaption *s)
{
	double annuity = 0;
	for (int i = 1; i <= s->tenor; i++)
		annuity += exp(log_bond[s->expiry + i]);
	return 1.0 - exp(log_bond[s->expiry + s->tenor]) - s->strike * DT * annuity;
}

/* The same, today, from the initial curve. */
static double forward_swap(const struct swaption *s)
{
	double log_bond[MAX_STEPS + 1];
	for (int j = 0; j <= s->expiry + s->tenor; j++)
		log_bond[j] = initial_log_bond(j) - initial_log_bond(s->expiry);
	return exp(initial_log_bond(s->expiry)) * swap_value(log_bond, s);
}

/* The strike that makes the swap worth nothing today. */
static double forward_rate(const struct swaption *s)
{
	struct swaption unit = *s;
	unit.strike = 0;
	double floating = forward_swap(&unit);
	unit.strike = 1;
	return floating / (floating - forward_swap(&unit));
}

static void normals(unsigned long long *rng, double *z, int n)
{
	for (int i = 0; i < n; i += 2) {
		double u = paper_uniform(rng), v = paper_uniform(rng);
		double r = sqrt(-2.0 * log(u > 0 ? u : 1e-300));
		z[i] = r * cos(2 * M_PI * v);
		if (i + 1 < n)
			z[i + 1] = r * sin(2 * M_PI * v);
	}
}

/* Prices one swaption over `count` paths; `done(k)` reports progress every BLOCK paths. */
static void price(struct swaption *s, unsigned long long seed, long count, double base, double share)
{
	int horizon = s->expiry + s->tenor;
	double log_bond[MAX_STEPS + 1], z[FACTORS + 1];
	double sum_payer = 0, sum_receiver = 0, sum_swap = 0, sum_swap2 = 0;
	unsigned long long rng = seed;
	for (long path = 0; path < count; path++) {
		if (path % BLOCK == 0)
			paper_progress(base + share * path / count, "simulate");
		for (int j = 0; j <= horizon; j++)
			log_bond[j] = initial_log_bond(j);
		double log_account = 0;	/* log of the money-market account */
		for (int i = 0; i < s->expiry; i++) {
			normals(&rng, z, FACTORS);
			double roll = log_bond[i + 1];
			log_account -= roll;
			for (int j = i + 1; j <= horizon; j++) {
				int tau = j - i - 1;
				double shock = 0;
				for (int k = 0; k < FACTORS; k++)
					shock += bond_vol[k][tau] * z[k];
				log_bond[j] += -roll - drift[tau] - shock * sqrt(DT);
			}
		}
		double v = swap_value(log_bond, s) * exp(-log_account);
		sum_swap += v, sum_swap2 += v * v;
		if (v > 0)
			sum_payer += v;
		else
			sum_receiver -= v;
	}
	s->payer = sum_payer / count, s->receiver = sum_receiver / count;
	s->swap_mean = sum_swap / count;
	double var = sum_swap2 / count - s->swap_mean * s->swap_mean;
	s->swap_se = sqrt(var > 0 ? var / count : 0);
}

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	int first = n_swaptions * t / nthreads, last = n_swaptions * (t + 1) / nthreads;
	for (int k = first; k < last; k++)
		price(&swaptions[k], paper_seed(100 + k), trials, (double)(k - first) / (last - first), 1.0 / (last - first));
	paper_progress_end("simulate");
	return NULL;
}

int main(int argc, char **argv)
{
	enum paper_size size;
	paper_args(argc, argv, "swaptions", &nthreads, &size);
	n_swaptions = PAPER_BY_SIZE(size, 16, 64, 128);
	trials = PAPER_BY_SIZE(size, 2000, 20000, 100000);
	swaptions = calloc(n_swaptions, sizeof *swaptions);
	unsigned long long rng = paper_seed(3);
	for (int k = 0; k < n_swaptions; k++) {
		struct swaption *s = &swaptions[k];
		s->expiry = 4 + (int)(paper_uniform(&rng) * 17);	/* 1 to 5 years */
		s->tenor = 4 + (int)(paper_uniform(&rng) * 17);
		s->strike = forward_rate(s) * (0.8 + 0.4 * paper_uniform(&rng));
		s->swap_exact = forward_swap(s);
	}

	/* Zero volatility first: outside the region of interest, a handful of paths. */
	set_volatility(0.0);
	struct swaption flat = swaptions[0];
	flat.strike = 0.9 * forward_rate(&flat);
	flat.swap_exact = forward_swap(&flat);
	paper_next_slot = PAPER_SLOTS;		/* no breakpoints in this pass */
	price(&flat, 1, 4, 0, 1);
	paper_next_slot = 0;
	double flat_err = fabs(flat.payer - fmax(flat.swap_exact, 0));

	set_volatility(1.0);
	paper_roi(nthreads, worker);

	double worst = 0, parity = 0;
	for (int k = 0; k < n_swaptions; k++) {
		const struct swaption *s = &swaptions[k];
		double sigmas = fabs(s->swap_mean - s->swap_exact) / s->swap_se;
		if (sigmas > worst)
			worst = sigmas;
		double p = fabs(s->payer - s->receiver - s->swap_mean);
		if (p > parity)
			parity = p;
	}
	printf("swaption 0: expiry %.2f y, tenor %.2f y, strike %.4f: payer %.6f, receiver %.6f\n",
	       swaptions[0].expiry * DT, swaptions[0].tenor * DT, swaptions[0].strike, swaptions[0].payer, swaptions[0].receiver);
	paper_check(worst < 5.0 && parity < 1e-12, "payer - receiver = swap for %d swaptions x %ld paths: worst %.2f standard errors from the curve's price", n_swaptions, trials, worst);
	paper_check(flat_err < 1e-12, "zero volatility: payer %.8f = max(swap, 0) %.8f", flat.payer, fmax(flat.swap_exact, 0));
	return paper_finish();
}
