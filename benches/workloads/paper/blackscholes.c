/*
 * Black-Scholes option pricing, the shape of PARSEC's blackscholes: a compute-bound
 * kernel over a small array of options (about 4 MB at the default size), priced again
 * and again (PARSEC's NUM_RUNS), each thread over its own contiguous share.
 *
 * Self-check: put-call parity (C - P = S - K e^(-rT)) for every option, from a put and a
 * call priced by the same kernel; one option against its textbook value (S = K = 100,
 * r = 5%, sigma = 20%, T = 1: call 10.4506); every run priced every option alike.
 *
 *   usage: blackscholes THREADS [small|default|large]
 */
#include <math.h>

#include "paper.h"

struct option {
	double s, k, r, v, t;
	int put;
};

static struct option *opts;
static double *prices;
static long n_options, n_runs;
static int nthreads;
static double checksum_first, checksum_last;

static double cndf(double x)
{
	/* The Abramowitz-Stegun approximation PARSEC uses (|error| < 7.5e-8). */
	int neg = x < 0;
	if (neg)
		x = -x;
	double k = 1.0 / (1.0 + 0.2316419 * x);
	double poly = k * (0.319381530 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429))));
	double n = 1.0 - exp(-0.5 * x * x) * 0.39894228040143267794 * poly;
	return neg ? 1.0 - n : n;
}

static double price(const struct option *o, int put)
{
	double sqrt_t = sqrt(o->t);
	double d1 = (log(o->s / o->k) + (o->r + 0.5 * o->v * o->v) * o->t) / (o->v * sqrt_t);
	double d2 = d1 - o->v * sqrt_t;
	double disc = o->k * exp(-o->r * o->t);
	if (put)
		return disc * cndf(-d2) - o->s * cndf(-d1);
	return o->s * cndf(d1) - disc * cndf(d2);
}

static void *worker(void *arg)
{
	long t = (long)arg;
	long first = n_options * t / nthreads, last = n_options * (t + 1) / nthreads;
	for (long run = 0; run < n_runs; run++) {
		paper_progress((double)run / n_runs, "price");
		double sum = 0;
		for (long i = first; i < last; i++) {
			prices[i] = price(&opts[i], opts[i].put);
			sum += prices[i];
		}
		if (t == 0 && run == 0)
			checksum_first = sum;
		if (t == 0 && run == n_runs - 1)
			checksum_last = sum;
	}
	paper_progress_end("price");
	return NULL;
}

int main(int argc, char **argv)
{
	enum paper_size size;
	paper_args(argc, argv, "blackscholes", &nthreads, &size);
	n_options = PAPER_BY_SIZE(size, 16384, 65536, 1 << 20);
	n_runs = PAPER_BY_SIZE(size, 8, 700, 100);
	opts = malloc(n_options * sizeof *opts);
	prices = malloc(n_options * sizeof *prices);
	unsigned long long rng = paper_seed(1);
	for (long i = 0; i < n_options; i++) {
		struct option *o = &opts[i];
		o->s = 40 + 80 * paper_uniform(&rng);
		o->k = o->s * (0.7 + 0.6 * paper_uniform(&rng));
		o->r = 0.01 + 0.09 * paper_uniform(&rng);
		o->v = 0.05 + 0.6 * paper_uniform(&rng);
		o->t = 0.1 + 2.9 * paper_uniform(&rng);
		o->put = paper_uniform(&rng) < 0.5;
	}
	opts[0] = (struct option){ 100, 100, 0.05, 0.2, 1.0, 0 };

	paper_roi(nthreads, worker);

	double worst = 0;
	for (long i = 0; i < n_options; i++) {
		const struct option *o = &opts[i];
		double call = o->put ? price(o, 0) : prices[i];
		double put = o->put ? prices[i] : price(o, 1);
		double parity = fabs(call - put - (o->s - o->k * exp(-o->r * o->t))) / o->s;
		if (parity > worst)
			worst = parity;
	}
	paper_check(worst < 1e-6, "put-call parity over %ld options, worst error %.2e of the spot", n_options, worst);
	paper_check(fabs(prices[0] - 10.4506) < 1e-3, "textbook call (S=K=100, r=5%%, sigma=20%%, T=1) = %.4f, expected 10.4506", prices[0]);
	paper_check(checksum_first == checksum_last, "%ld runs priced alike (thread 0's sum %.6f)", n_runs, checksum_last);
	free(opts);
	free(prices);
	return paper_finish();
}
