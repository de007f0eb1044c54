/*
 * Barnes-Hut n-body tree code, the shape of SPLASH-2's BARNES: a Plummer sphere of
 * bodies integrated by leapfrog. Each step all threads insert their bodies into one
 * shared octree, locking a cell only to change one of its children (a new cell is
 * published complete, so descending needs no lock); thread 0 sums the cells' masses;
 * then each thread computes the forces on its bodies by walking the tree (a cell is
 * opened when its size over its distance exceeds theta) and moves them. Four barriers
 * per step.
 *
 * Self-check: the tree's accelerations on 64 bodies against direct summation (theta =
 * 0.5: well under 1% on average); total energy (kinetic plus the tree's potential) kept
 * to 1%; total momentum, which tree forces conserve only approximately, kept near zero.
 *
 *   usage: barnes THREADS [small|default|large]
 */
#include <math.h>

#include "paper.h"

#define THETA 0.5
#define EPS 0.025		/* softening */
#define DT 0.0125
#define EMPTY (-1)

struct vec { double x, y, z; };

struct cell {
	struct vec center;	/* of the cube */
	double half;		/* half its side */
	int child[8];		/* EMPTY, a body (< n) or n + a cell */
	struct vec com;		/* centre of mass */
	double mass;
	pthread_mutex_t lock;
};

static int nthreads, steps;
static int n;
static struct vec *pos, *vel, *acc;
static double *phi, body_mass;
static struct cell *cells;
static int max_cells;
static int cell_count;		/* atomic */
static pthread_barrier_t barrier;
static struct vec box_center;
static double box_half;

static int octant(const struct cell *c, struct vec p)
{
	return (p.x > c->center.x) | (p.y > c->center.y) << 1 | (p.z > c->center.z) << 2;
}

static int new_cell(struct vec center, double half)
{
	int c = __atomic_fetch_add(&cell_count, 1, __ATOMIC_RELAXED);
	if (c >= max_cells) {
		fprintf(stderr, "barnes: more than %d cells\n", max_cells);
		exit(3);
	}
	struct cell *k = &cells[c];
	k->center = center, k->half = half;
	for (int o = 0; o < 8; o++)
		k->child[o] = EMPTY;
	return c;
}

static struct vec sub_center(const struct cell *c, int o)
{
	double q = c->half / 2;
	return (struct vec){ c->center.x + (o & 1 ? q : -q), c->center.y + (o & 2 ? q : -q), c->center.z + (o & 4 ? q : -q) };
}

static void insert(int b)
{
	int c = 0;
	for (int depth = 0;; depth++) {
		if (depth > 60) {
			fprintf(stderr, "barnes: bodies %d and another coincide\n", b);
			exit(3);
		}
		struct cell *k = &cells[c];
		int o = octant(k, pos[b]);
		int ch = __atomic_load_n(&k->child[o], __ATOMIC_ACQUIRE);
		if (ch >= n) {
			c = ch - n;
			continue;
		}
		pthread_mutex_lock(&k->lock);
		ch = k->child[o];
		if (ch == EMPTY) {
			__atomic_store_n(&k->child[o], b, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&k->lock);
			return;
		}
		if (ch < n) {
			/* A body is there: a new cell takes it, and the descent goes on in it. */
			int fresh = new_cell(sub_center(k, o), k->half / 2);
			cells[fresh].child[octant(&cells[fresh], pos[ch])] = ch;
			__atomic_store_n(&k->child[o], n + fresh, __ATOMIC_RELEASE);
			ch = n + fresh;
		}
		pthread_mutex_unlock(&k->lock);
		c = ch - n;
	}
}

static void sum_masses(int c)
{
	struct cell *k = &cells[c];
	k->mass = 0, k->com = (struct vec){ 0, 0, 0 };
	for (int o = 0; o < 8; o++) {
		int ch = k->child[o];
		if (ch == EMPTY)
			continue;
		double m;
		struct vec p;
		if (ch < n) {
			m = body_mass, p = pos[ch];
		} else {
			sum_masses(ch - n);
			m = cells[ch - n].mass, p = cells[ch - n].com;
		}
		k->mass += m;
		k->com.x += m * p.x, k->com.y += m * p.y, k->com.z += m * p.z;
	}
	if (k->mass > 0)
		k->com.x /= k->mass, k->com.y /= k->mass, k->com.z /= k->mass;
}

static void interact(struct vec p, struct vec q, double m, struct vec *a, double *pot)
{
	double dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
	double r2 = dx * dx + dy * dy + dz * dz + EPS * EPS;
	double inv = 1.0 / sqrt(r2), inv3 = inv * inv * inv;
	a->x += m * dx * inv3, a->y += m * dy * inv3, a->z += m * dz * inv3;
	*pot -= m * inv;
}

static void walk(int b, int c, struct vec *a, double *pot)
{
	const struct cell *k = &cells[c];
	double dx = k->com.x - pos[b].x, dy = k->com.y - pos[b].y, dz = k->com.z - pos[b].z;
	double d2 = dx * dx + dy * dy + dz * dz;
	if (4 * k->half * k->half < THETA * THETA * d2) {
		interact(pos[b], k->com, k->mass, a, pot);
		return;
	}
	for (int o = 0; o < 8; o++) {
		int ch = k->child[o];
		if (ch == EMPTY || ch == b)
			continue;
		if (ch < n)
			interact(pos[b], pos[ch], body_mass, a, pot);
		else
			walk(b, ch - n, a, pot);
	}
}

/*
 * Builds the tree and computes every body's acceleration and potential (3 barriers);
 * this thread's progress through the run goes from `base` to `base + share`.
 */
static void forces(int t, int b0, int b1, double base, double share)
{
	if (t == 0) {
		/* The root: a cube around every body. */
		struct vec lo = pos[0], hi = pos[0];
		for (int b = 1; b < n; b++) {
			lo.x = fmin(lo.x, pos[b].x), lo.y = fmin(lo.y, pos[b].y), lo.z = fmin(lo.z, pos[b].z);
			hi.x = fmax(hi.x, pos[b].x), hi.y = fmax(hi.y, pos[b].y), hi.z = fmax(hi.z, pos[b].z);
		}
		box_center = (struct vec){ (lo.x + hi.x) / 2, (lo.y + hi.y) / 2, (lo.z + hi.z) / 2 };
		box_half = 1.01 * fmax(hi.x - lo.x, fmax(hi.y - lo.y, hi.z - lo.z)) / 2;
		cell_count = 0;
		new_cell(box_center, box_half);
	}
	pthread_barrier_wait(&barrier);
	for (int b = b0; b < b1; b++)
		insert(b);
	if (pthread_barrier_wait(&barrier) == PTHREAD_BARRIER_SERIAL_THREAD)
		sum_masses(0);
	pthread_barrier_wait(&barrier);
	for (int b = b0; b < b1; b++) {
		if ((b - b0) % 64 == 0)
			paper_progress(base + share * (b - b0) / (b1 - b0), "forces");
		acc[b] = (struct vec){ 0, 0, 0 }, phi[b] = 0;
		walk(b, 0, &acc[b], &phi[b]);
	}
}

static void kick(int b0, int b1)
{
	for (int b = b0; b < b1; b++)
		vel[b].x += acc[b].x * DT / 2, vel[b].y += acc[b].y * DT / 2, vel[b].z += acc[b].z * DT / 2;
}

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	int b0 = (int)((long)n * t / nthreads), b1 = (int)((long)n * (t + 1) / nthreads);
	/* Force passes take nearly all the time: progress is counted in them. */
	double share = 1.0 / (steps + 1);
	forces(t, b0, b1, 0, share);
	for (int step = 0; step < steps; step++) {
		kick(b0, b1);
		for (int b = b0; b < b1; b++)
			pos[b].x += vel[b].x * DT, pos[b].y += vel[b].y * DT, pos[b].z += vel[b].z * DT;
		pthread_barrier_wait(&barrier);
		forces(t, b0, b1, (step + 1) * share, share);
		kick(b0, b1);
		pthread_barrier_wait(&barrier);
	}
	paper_progress_end("forces");
	return NULL;
}

static double energy(void)
{
	double e = 0;
	for (int b = 0; b < n; b++)
		e += body_mass * (0.5 * (vel[b].x * vel[b].x + vel[b].y * vel[b].y + vel[b].z * vel[b].z) + 0.5 * phi[b]);
	return e;
}

/* A Plummer sphere in virial units (total mass 1, G = 1), as SPLASH-2's testdata. */
static void plummer(void)
{
	unsigned long long rng = paper_seed(5);
	const double scale = 3 * M_PI / 16;
	struct vec cm = { 0, 0, 0 }, cv = { 0, 0, 0 };
	for (int b = 0; b < n; b++) {
		double r = 1.0 / sqrt(pow(0.999 * paper_uniform(&rng) + 1e-10, -2.0 / 3.0) - 1.0);
		double z = 2 * paper_uniform(&rng) - 1, a = 2 * M_PI * paper_uniform(&rng), s = sqrt(1 - z * z);
		pos[b] = (struct vec){ scale * r * s * cos(a), scale * r * s * sin(a), scale * r * z };
		double x, y;
		do {
			x = paper_uniform(&rng), y = 0.1 * paper_uniform(&rng);
		} while (y > x * x * pow(1 - x * x, 3.5));
		double v = x * sqrt(2.0) * pow(1 + r * r, -0.25) / sqrt(scale);
		z = 2 * paper_uniform(&rng) - 1, a = 2 * M_PI * paper_uniform(&rng), s = sqrt(1 - z * z);
		vel[b] = (struct vec){ v * s * cos(a), v * s * sin(a), v * z };
		cm.x += pos[b].x / n, cm.y += pos[b].y / n, cm.z += pos[b].z / n;
		cv.x += vel[b].x / n, cv.y += vel[b].y / n, cv.z += vel[b].z / n;
	}
	for (int b = 0; b < n; b++) {
		pos[b].x -= cm.x, pos[b].y -= cm.y, pos[b].z -= cm.z;
		vel[b].x -= cv.x, vel[b].y -= cv.y, vel[b].z -= cv.z;
	}
}

static void *first_forces(void *arg)
{
	int t = (int)(long)arg;
	paper_next_slot = PAPER_SLOTS;		/* no breakpoints in this pass */
	forces(t, (int)((long)n * t / nthreads), (int)((long)n * (t + 1) / nthreads), 0, 0);
	return NULL;
}

int main(int argc, char **argv)
{
	enum paper_size size;
	paper_args(argc, argv, "barnes", &nthreads, &size);
	n = PAPER_BY_SIZE(size, 2048, 16384, 131072);
	steps = PAPER_BY_SIZE(size, 2, 4, 6);
	body_mass = 1.0 / n;
	pos = malloc(n * sizeof *pos), vel = malloc(n * sizeof *vel), acc = malloc(n * sizeof *acc);
	phi = malloc(n * sizeof *phi);
	max_cells = 2 * n + 64;
	cells = malloc(max_cells * sizeof *cells);
	for (int c = 0; c < max_cells; c++)
		pthread_mutex_init(&cells[c].lock, NULL);
	plummer();
	pthread_barrier_init(&barrier, NULL, nthreads);

	/* The energy at the start, from a force pass outside the region of interest. */
	paper_parallel(nthreads, first_forces);
	double e0 = energy();

	paper_roi(nthreads, worker);

	double e1 = energy();
	struct vec p = { 0, 0, 0 };
	double scale = 0;
	for (int b = 0; b < n; b++) {
		p.x += body_mass * vel[b].x, p.y += body_mass * vel[b].y, p.z += body_mass * vel[b].z;
		scale += body_mass * sqrt(vel[b].x * vel[b].x + vel[b].y * vel[b].y + vel[b].z * vel[b].z);
	}
	double rel = 0;
	for (int s = 0; s < 64; s++) {
		int b = (int)((long)s * n / 64);
		struct vec a = { 0, 0, 0 };
		double pot = 0;
		for (int o = 0; o < n; o++)
			if (o != b)
				interact(pos[b], pos[o], body_mass, &a, &pot);
		double dx = a.x - acc[b].x, dy = a.y - acc[b].y, dz = a.z - acc[b].z;
		rel += sqrt(dx * dx + dy * dy + dz * dz) / sqrt(a.x * a.x + a.y * a.y + a.z * a.z) / 64;
	}
	double drift = fabs(e1 - e0) / fabs(e0);
	double momentum = sqrt(p.x * p.x + p.y * p.y + p.z * p.z) / scale;
	paper_check(rel < 0.01, "tree forces on 64 of %d bodies against direct summation: mean error %.3f%%", n, 100 * rel);
	paper_check(drift < 0.01, "energy over %d steps: %.6f -> %.6f (drift %.4f%%)", steps, e0, e1, 100 * drift);
	paper_check(momentum < 0.01, "total momentum %.2e of the sum of |momentum|", momentum);
	return paper_finish();
}
