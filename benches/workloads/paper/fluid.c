/*
 * Smoothed-particle fluid on a grid, the shape of PARSEC's fluidanimate: a dam of
 * particles falls in a box, the grid of cells (one smoothing length wide) is rebuilt
 * every step, and each thread owns a slab of cells. Pairs of particles are visited once
 * and both are updated (density, then pressure and viscosity forces), so a thread adds
 * into particles of its neighbour's border cells: those updates take the cell's mutex.
 * Six barriers per step. About 150 bytes per particle: 60 MB at the default size, 400 MB
 * at the large one.
 *
 * Self-check: momentum balance. Pair forces are equal and opposite, so the total
 * momentum changes only by gravity and by the walls (whose impulses are recorded): a
 * lost or doubled update shows as a mismatch. Also: every particle stays in the box,
 * densities are positive and finite, and no particle moves faster than the dam's fall.
 *
 *   usage: fluid THREADS [small|default|large]
 */
#include <math.h>

#include "paper.h"

#define H 1.0		/* smoothing length = cell size */
#define DT 0.004
#define GRAVITY -9.8
#define STIFFNESS 30.0
#define VISCOSITY 0.2
#define WALL_DAMPING 0.5

struct vec { double x, y, z; };

static int nthreads, steps;
static long n;				/* particles */
static int nx, ny, nz;			/* cells */
static long ncells;
static double mass, rest_density;
static double poly6, spiky, visc_lap;

/* Particles, in cell order after each rebuild; `next_*` are the rebuild's target. */
static struct vec *pos, *vel, *acc, *next_pos, *next_vel;
static double *density;
static int *cell_of;
static int *cell_start, *cell_count, *cell_fill;
static unsigned char *border;		/* a cell another thread's pairs reach */
static pthread_mutex_t *cell_lock;
static pthread_barrier_t barrier;
static struct vec *wall_impulse;	/* per thread */

static int cell_x(double x) { int c = (int)(x / H); return c < 0 ? 0 : c >= nx ? nx - 1 : c; }
static int cell_y(double y) { int c = (int)(y / H); return c < 0 ? 0 : c >= ny ? ny - 1 : c; }
static int cell_z(double z) { int c = (int)(z / H); return c < 0 ? 0 : c >= nz ? nz - 1 : c; }
static long cell_index(int x, int y, int z) { return ((long)x * ny + y) * nz + z; }

static int slab_begin(int t) { return nx * t / nthreads; }

/* Adds one cell's gathered sums into its particles, under its lock if others reach it. */
static void add_sums(long c, const double *sums, int forces)
{
	if (border[c])
		pthread_mutex_lock(&cell_lock[c]);
	for (int a = 0; a < cell_count[c]; a++) {
		long i = cell_start[c] + a;
		if (!forces)
			density[i] += sums[a];
		else
			acc[i].x += sums[3 * a], acc[i].y += sums[3 * a + 1], acc[i].z += sums[3 * a + 2];
	}
	if (border[c])
		pthread_mutex_unlock(&cell_lock[c]);
}

/* Half of the 26 neighbours, so that each pair of cells is visited once. */
static const int half_shell[13][3] = {
	{ 1, -1, -1 }, { 1, -1, 0 }, { 1, -1, 1 }, { 1, 0, -1 }, { 1, 0, 0 }, { 1, 0, 1 },
	{ 1, 1, -1 }, { 1, 1, 0 }, { 1, 1, 1 }, { 0, 1, -1 }, { 0, 1, 0 }, { 0, 1, 1 }, { 0, 0, 1 },
};

/*
 * Visits every pair of particles closer than H once, cell pair by cell pair, with the
 * two cells' sums gathered in `gi` / `gj` (one slot per particle of the cell) and added
 * under the cells' locks. `forces` picks the pass: 0 density, 1 pressure + viscosity.
 * This thread's progress through the run goes from `base` to `base + share`.
 */
static void pairs(int t, int forces, double *scratch, double base, double share)
{
	int x0 = slab_begin(t), x1 = slab_begin(t + 1);
	for (int x = x0; x < x1; x++)
		for (int y = 0; y < ny; y++) {
			paper_progress(base + share * ((x - x0) * ny + y) / ((x1 - x0) * ny), forces ? "forces" : "densities");
			for (int z = 0; z < nz; z++) {
				long ci = cell_index(x, y, z);
				int first_i = cell_start[ci], count_i = cell_count[ci];
				if (count_i == 0)
					continue;
				for (int k = -1; k < 13; k++) {
					long cj = ci;
					if (k >= 0) {
						int x2 = x + half_shell[k][0], y2 = y + half_shell[k][1], z2 = z + half_shell[k][2];
						if (x2 >= nx || y2 < 0 || y2 >= ny || z2 < 0 || z2 >= nz)
							continue;
						cj = cell_index(x2, y2, z2);
					}
					int first_j = cell_start[cj], count_j = cell_count[cj];
					if (count_j == 0)
						continue;
					int width = forces ? 3 : 1;
					double *gi = scratch, *gj = scratch + width * count_i;
					memset(scratch, 0, sizeof(double) * width * (count_i + count_j));
					for (int a = 0; a < count_i; a++) {
						int i = first_i + a;
						for (int b = k < 0 ? a + 1 : 0; b < count_j; b++) {
							int j = first_j + b;
							double dx = pos[i].x - pos[j].x, dy = pos[i].y - pos[j].y, dz = pos[i].z - pos[j].z;
							double r2 = dx * dx + dy * dy + dz * dz;
							if (r2 >= H * H)
								continue;
							if (!forces) {
								double w = H * H - r2;
								w = w * w * w;
								gi[a] += w, gj[b] += w;
								continue;
							}
							double r = sqrt(r2 > 1e-12 ? r2 : 1e-12);
							double pi = STIFFNESS * (density[i] - rest_density);
							double pj = STIFFNESS * (density[j] - rest_density);
							double hr = H - r;
							double press = mass * (pi / (density[i] * density[i]) + pj / (density[j] * density[j])) * spiky * hr * hr / r;
							double vis = VISCOSITY * mass * visc_lap * hr / (density[i] * density[j]);
							double fx = press * dx + vis * (vel[j].x - vel[i].x);
							double fy = press * dy + vis * (vel[j].y - vel[i].y);
							double fz = press * dz + vis * (vel[j].z - vel[i].z);
							gi[3 * a] += fx, gi[3 * a + 1] += fy, gi[3 * a + 2] += fz;
							gj[3 * b] -= fx, gj[3 * b + 1] -= fy, gj[3 * b + 2] -= fz;
						}
					}
					add_sums(ci, gi, forces);
					add_sums(cj, gj, forces);
				}
			}
		}
}

static long range_begin(long total, int t) { return total * t / nthreads; }

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	long p0 = range_begin(n, t), p1 = range_begin(n, t + 1);
	long c0 = range_begin(ncells, t), c1 = range_begin(ncells, t + 1);
	static int max_count;
	double *scratch = NULL;
	/* Where each phase starts in a step, by its share of the time. */
	const double rebuild = 0.0, densities = 0.1, forces = 0.4, advance = 0.95;
	struct vec impulse = { 0, 0, 0 };
	for (int step = 0; step < steps; step++) {
		/* 1. Count particles per cell. */
		paper_progress((step + rebuild) / steps, "rebuild");
		for (long c = c0; c < c1; c++)
			cell_count[c] = 0, cell_fill[c] = 0;
		pthread_barrier_wait(&barrier);
		for (long i = p0; i < p1; i++) {
			long c = cell_index(cell_x(pos[i].x), cell_y(pos[i].y), cell_z(pos[i].z));
			cell_of[i] = (int)c;
			__atomic_fetch_add(&cell_count[c], 1, __ATOMIC_RELAXED);
		}
		if (pthread_barrier_wait(&barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
			int start = 0, most = 0;
			for (long c = 0; c < ncells; c++) {
				cell_start[c] = start;
				start += cell_count[c];
				if (cell_count[c] > most)
					most = cell_count[c];
			}
			max_count = most;
		}
		pthread_barrier_wait(&barrier);
		/* 2. Move particles into cell order. */
		free(scratch);
		scratch = malloc(sizeof(double) * 6 * max_count);
		for (long i = p0; i < p1; i++) {
			long c = cell_of[i];
			int slot = cell_start[c] + __atomic_fetch_add(&cell_fill[c], 1, __ATOMIC_RELAXED);
			next_pos[slot] = pos[i];
			next_vel[slot] = vel[i];
		}
		pthread_barrier_wait(&barrier);
		if (t == 0) {
			struct vec *swap = pos;
			pos = next_pos, next_pos = swap;
			swap = vel, vel = next_vel, next_vel = swap;
		}
		for (long i = p0; i < p1; i++)
			density[i] = 0, acc[i] = (struct vec){ 0, 0, 0 };
		pthread_barrier_wait(&barrier);
		/* 3. Densities. */
		pairs(t, 0, scratch, (step + densities) / steps, (forces - densities) / steps);
		pthread_barrier_wait(&barrier);
		for (long i = p0; i < p1; i++)
			density[i] = mass * poly6 * (density[i] + H * H * H * H * H * H);
		pthread_barrier_wait(&barrier);
		/* 4. Forces. */
		pairs(t, 1, scratch, (step + forces) / steps, (advance - forces) / steps);
		pthread_barrier_wait(&barrier);
		/* 5. Advance, and bounce off the walls. */
		paper_progress((step + advance) / steps, "advance");
		for (long i = p0; i < p1; i++) {
			struct vec *v = &vel[i], *p = &pos[i];
			v->x += DT * acc[i].x, v->y += DT * (acc[i].y + GRAVITY), v->z += DT * acc[i].z;
			p->x += DT * v->x, p->y += DT * v->y, p->z += DT * v->z;
			double *pc[3] = { &p->x, &p->y, &p->z }, *vc[3] = { &v->x, &v->y, &v->z };
			double *ic[3] = { &impulse.x, &impulse.y, &impulse.z };
			double top[3] = { nx * H, ny * H, nz * H };
			for (int d = 0; d < 3; d++) {
				double lo = 0.01 * H, hi = top[d] - 0.01 * H;
				if ((*pc[d] < lo && *vc[d] < 0) || (*pc[d] > hi && *vc[d] > 0)) {
					double before = *vc[d];
					*vc[d] = -WALL_DAMPING * before;
					*ic[d] += *vc[d] - before;
				}
				*pc[d] = *pc[d] < lo ? lo : *pc[d] > hi ? hi : *pc[d];
			}
		}
		pthread_barrier_wait(&barrier);
	}
	paper_progress_end("advance");
	free(scratch);
	wall_impulse[t] = impulse;
	return NULL;
}

static struct vec momentum(void)
{
	struct vec m = { 0, 0, 0 };
	for (long i = 0; i < n; i++)
		m.x += vel[i].x, m.y += vel[i].y, m.z += vel[i].z;
	return m;
}

int main(int argc, char **argv)
{
	enum paper_size size;
	paper_args(argc, argv, "fluid", &nthreads, &size);
	nx = PAPER_BY_SIZE(size, 24, 80, 150);
	steps = PAPER_BY_SIZE(size, 6, 8, 8);
	ny = nz = nx / 2;
	ncells = (long)nx * ny * nz;
	if (nx < 2 * nthreads) {
		fprintf(stderr, "fluid: %d threads need at least %d cells across\n", nthreads, 2 * nthreads);
		return 2;
	}
	/* The dam: a lattice two particles per cell width, 3/4 of the length, half the height. */
	long lx = nx * 3 / 2, ly = ny, lz = nz * 2;
	n = lx * ly * lz;
	pos = malloc(n * sizeof *pos), vel = calloc(n, sizeof *vel), acc = malloc(n * sizeof *acc);
	next_pos = malloc(n * sizeof *pos), next_vel = malloc(n * sizeof *vel);
	density = malloc(n * sizeof *density), cell_of = malloc(n * sizeof *cell_of);
	cell_start = malloc(ncells * sizeof(int)), cell_count = calloc(ncells, sizeof(int));
	cell_fill = calloc(ncells, sizeof(int)), border = calloc(ncells, 1);
	cell_lock = malloc(ncells * sizeof *cell_lock);
	wall_impulse = calloc(nthreads, sizeof *wall_impulse);
	unsigned long long rng = paper_seed(2);
	long i = 0;
	for (long a = 0; a < lx; a++)
		for (long b = 0; b < ly; b++)
			for (long c = 0; c < lz; c++, i++)
				pos[i] = (struct vec){ (a + 0.5 + 0.1 * paper_uniform(&rng)) * H / 2,
						       (b + 0.5 + 0.1 * paper_uniform(&rng)) * H / 2,
						       (c + 0.5 + 0.1 * paper_uniform(&rng)) * H / 2 };
	for (long c = 0; c < ncells; c++)
		pthread_mutex_init(&cell_lock[c], NULL);
	for (int t = 0; t < nthreads; t++) {
		int first = slab_begin(t), last = slab_begin(t + 1) - 1;
		for (int y = 0; y < ny; y++)
			for (int z = 0; z < nz; z++)
				border[cell_index(first, y, z)] = border[cell_index(last, y, z)] = 1;
	}
	poly6 = 315.0 / (64.0 * M_PI * pow(H, 9));
	spiky = 45.0 / (M_PI * pow(H, 6));
	visc_lap = 45.0 / (M_PI * pow(H, 6));
	/* Mass such that a lattice particle's density is 1000. */
	double sum = 0;
	for (int a = -2; a <= 2; a++)
		for (int b = -2; b <= 2; b++)
			for (int c = -2; c <= 2; c++) {
				double r2 = (a * a + b * b + c * c) * H * H / 4;
				if (r2 < H * H)
					sum += pow(H * H - r2, 3);
			}
	rest_density = 1000.0;
	mass = rest_density / (poly6 * sum);

	struct vec m0 = momentum();
	pthread_barrier_init(&barrier, NULL, nthreads);
	paper_roi(nthreads, worker);

	struct vec m1 = momentum(), walls = { 0, 0, 0 };
	for (int t = 0; t < nthreads; t++)
		walls.x += wall_impulse[t].x, walls.y += wall_impulse[t].y, walls.z += wall_impulse[t].z;
	double gravity = n * steps * DT * GRAVITY;
	double scale = fabs(gravity) + fabs(walls.x) + fabs(walls.y) + fabs(walls.z);
	double err = fabs(m1.x - m0.x - walls.x) + fabs(m1.y - m0.y - gravity - walls.y) + fabs(m1.z - m0.z - walls.z);
	paper_check(err <= 1e-9 * scale + 1e-9, "momentum balance over %ld particles, %d steps: mismatch %.2e of %.2e", n, steps, err, scale);
	int inside = 1, dense = 1;
	double fastest = 0;
	for (long k = 0; k < n; k++) {
		inside &= pos[k].x >= 0 && pos[k].x <= nx * H && pos[k].y >= 0 && pos[k].y <= ny * H && pos[k].z >= 0 && pos[k].z <= nz * H;
		dense &= density[k] > 0 && isfinite(density[k]);
		double v = sqrt(vel[k].x * vel[k].x + vel[k].y * vel[k].y + vel[k].z * vel[k].z);
		if (!(v <= fastest))
			fastest = v;
	}
	double fall = fabs(GRAVITY) * steps * DT;
	paper_check(inside && dense, "every particle in the box, every density positive");
	paper_check(fastest < 10 * fall + 1.0, "fastest particle %.3f (free fall reaches %.3f)", fastest, fall);
	return paper_finish();
}
