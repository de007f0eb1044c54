/*
 * Tracking an articulated figure through frames from several cameras, a stand-in for
 * PARSEC's bodytrack that needs no input files: each frame is rendered (a five-segment
 * stick figure, moving, seen by four cameras through different affine views, with
 * noise), smoothed, turned into edge and foreground maps, and an annealed particle
 * filter finds the figure's pose (position, torso angle, two arms, two legs) again.
 * Image passes are split by rows with a barrier after each; the particles' likelihoods
 * are handed out from a shared ticket counter in chunks, as bodytrack's work pool does;
 * resampling between annealing layers is serial, on thread 0.
 *
 * Self-check: the tracked pose against the pose the frames were rendered from: the
 * segments' end points, averaged over a frame, within a third of a segment's half
 * thickness over the run and within one half thickness in every frame. The filter's
 * answer does not depend on the thread count (the final pose is printed).
 *
 *   usage: pose THREADS [small|default|large]
 */
#include <math.h>

#include "paper.h"

#define CAMERAS 4
#define DIMS 7			/* x, y, torso, left arm, right arm, left leg, right leg */
#define SEGMENTS 5
#define LAYERS 4
#define CHUNK 16
#define RADIUS 5.0		/* a segment's half thickness, in world units */
#define SAMPLES 8		/* points per segment scored in each camera */

struct camera { double a, b, c, d, ox, oy; };	/* image = [a b; c d] world + o */

static int nthreads, frames, particles, width, height;
static struct camera cams[CAMERAS];
static float *image, *smooth_tmp, *smooth, *edge, *fg;	/* CAMERAS planes each */
static float edge_max[256][CAMERAS];
static float edge_norm[CAMERAS];
static double (*pose)[DIMS], (*next_pose)[DIMS], *error;
static double truth[DIMS], estimate[DIMS];
static double mean_err_sum, worst_err;
static int ticket;
static pthread_barrier_t barrier;
static unsigned long long filter_rng;
static const double lengths[SEGMENTS] = { 40, 30, 30, 45, 45 };
static const double layer_noise[LAYERS] = { 1.0, 0.5, 0.25, 0.12 };
static const double noise_scale[DIMS] = { 4, 4, 0.12, 0.2, 0.2, 0.15, 0.15 };

static float *plane(float *base, int c) { return base + (long)c * width * height; }

/* The end points of each segment of the figure in pose p, in world units. */
static void segments(const double *p, double seg[SEGMENTS][4])
{
	double hip_x = p[0], hip_y = p[1];
	double sx = hip_x + lengths[0] * sin(p[2]), sy = hip_y + lengths[0] * cos(p[2]);
	double angle[SEGMENTS] = { p[2], p[2] + p[3], p[2] + p[4], M_PI + p[2] + p[5], M_PI + p[2] + p[6] };
	for (int s = 0; s < SEGMENTS; s++) {
		double x0 = s == 0 || s >= 3 ? hip_x : sx, y0 = s == 0 || s >= 3 ? hip_y : sy;
		seg[s][0] = x0, seg[s][1] = y0;
		seg[s][2] = x0 + lengths[s] * sin(angle[s]), seg[s][3] = y0 + lengths[s] * cos(angle[s]);
	}
}

static void true_pose(int f, double *p)
{
	double t = 0.1 * f;
	p[0] = 25 * sin(0.5 * t), p[1] = 5 * sin(0.9 * t);
	p[2] = 0.2 * sin(0.7 * t);
	p[3] = 1.2 + 0.6 * sin(1.3 * t), p[4] = -1.2 + 0.6 * sin(1.1 * t + 1);
	p[5] = 0.35 + 0.25 * sin(1.5 * t), p[6] = -0.35 + 0.25 * sin(1.5 * t + M_PI);
}

static void project(const struct camera *k, double x, double y, double *u, double *v)
{
	*u = k->a * x + k->b * y + k->ox;
	*v = k->c * x + k->d * y + k->oy;
}

static double distance_to_segment(double px, double py, const double *s)
{
	double dx = s[2] - s[0], dy = s[3] - s[1];
	double t = ((px - s[0]) * dx + (py - s[1]) * dy) / (dx * dx + dy * dy);
	t = t < 0 ? 0 : t > 1 ? 1 : t;
	double ex = s[0] + t * dx - px, ey = s[1] + t * dy - py;
	return sqrt(ex * ex + ey * ey);
}

/* Renders rows [r0, r1) of all cameras' images (row r is camera r / height). */
static void render(int f, long r0, long r1)
{
	double seg[SEGMENTS][4];
	segments(truth, seg);
	for (long r = r0; r < r1; r++) {
		int c = (int)(r / height), y = (int)(r % height);
		const struct camera *k = &cams[c];
		double det = k->a * k->d - k->b * k->c;
		unsigned long long rng = paper_seed((unsigned long long)f * 1000003 + r);
		for (int x = 0; x < width; x++) {
			/* The world point this pixel sees. */
			double u = x - k->ox, v = y - k->oy;
			double wx = (k->d * u - k->b * v) / det, wy = (-k->c * u + k->a * v) / det;
			int inside = 0;
			for (int s = 0; s < SEGMENTS && !inside; s++)
				inside = distance_to_segment(wx, wy, seg[s]) < RADIUS;
			image[r * width + x] = (float)((inside ? 200 : 60) + 30 * (paper_uniform(&rng) - 0.5));
		}
	}
}

/* 1-4-6-4-1 smoothing along rows (dir 0) or columns (dir 1) of rows [r0, r1). */
static void smooth_pass(const float *src, float *dst, int dir, long r0, long r1)
{
	static const float w[5] = { 1 / 16.f, 4 / 16.f, 6 / 16.f, 4 / 16.f, 1 / 16.f };
	for (long r = r0; r < r1; r++) {
		int c = (int)(r / height), y = (int)(r % height);
		const float *p = src + (long)c * width * height;
		for (int x = 0; x < width; x++) {
			float sum = 0;
			for (int k = -2; k <= 2; k++) {
				int xx = dir ? x : x + k, yy = dir ? y + k : y;
				xx = xx < 0 ? 0 : xx >= width ? width - 1 : xx;
				yy = yy < 0 ? 0 : yy >= height ? height - 1 : yy;
				sum += w[k + 2] * p[(long)yy * width + xx];
			}
			dst[r * width + x] = sum;
		}
	}
}

/* Sobel gradient magnitude and foreground of rows [r0, r1); the largest edge per camera. */
static void edges(int t, long r0, long r1)
{
	for (int c = 0; c < CAMERAS; c++)
		edge_max[t][c] = 0;
	for (long r = r0; r < r1; r++) {
		int c = (int)(r / height), y = (int)(r % height);
		const float *p = plane(smooth, c);
		for (int x = 0; x < width; x++) {
			float gx = 0, gy = 0;
			if (x > 0 && x < width - 1 && y > 0 && y < height - 1) {
				const float *q = p + (long)y * width + x;
				gx = (q[-width + 1] + 2 * q[1] + q[width + 1]) - (q[-width - 1] + 2 * q[-1] + q[width - 1]);
				gy = (q[width - 1] + 2 * q[width] + q[width + 1]) - (q[-width - 1] + 2 * q[-width] + q[-width + 1]);
			}
			float g = sqrtf(gx * gx + gy * gy);
			edge[r * width + x] = g;
			if (g > edge_max[t][c])
				edge_max[t][c] = g;
			fg[r * width + x] = p[(long)y * width + x] > 130 ? 1.0f : 0.0f;
		}
	}
}

static float lookup(const float *map, int c, double u, double v, float outside)
{
	int x = (int)lround(u), y = (int)lround(v);
	if (x < 0 || x >= width || y < 0 || y >= height)
		return outside;
	return plane((float *)map, c)[(long)y * width + x];
}

/* How badly pose p explains the maps: foreground on the segments, edges beside them. */
static double score(const double *p)
{
	double seg[SEGMENTS][4], err = 0;
	segments(p, seg);
	for (int c = 0; c < CAMERAS; c++)
		for (int s = 0; s < SEGMENTS; s++) {
			double dx = seg[s][2] - seg[s][0], dy = seg[s][3] - seg[s][1];
			double len = sqrt(dx * dx + dy * dy), nx = -dy / len * RADIUS, ny = dx / len * RADIUS;
			for (int k = 0; k < SAMPLES; k++) {
				double t = (k + 0.5) / SAMPLES, x = seg[s][0] + t * dx, y = seg[s][1] + t * dy, u, v;
				project(&cams[c], x, y, &u, &v);
				double miss = 1.0 - lookup(fg, c, u, v, 0);
				err += miss * miss;
				for (int side = -1; side <= 1; side += 2) {
					project(&cams[c], x + side * nx, y + side * ny, &u, &v);
					double e = 1.0 - fmin(1.0, lookup(edge, c, u, v, 0) / edge_norm[c]);
					err += e * e;
				}
			}
		}
	return err;
}

/* Weights from the errors, the weighted mean, resampling and diffusion (thread 0). */
static void resample(int layer)
{
	double best = error[0], mean = 0;
	for (int i = 0; i < particles; i++)
		best = fmin(best, error[i]), mean += error[i] / particles;
	double temperature = (mean - best) / (1.0 + layer) + 1e-9;
	double *weight = malloc(particles * sizeof *weight), total = 0;
	for (int i = 0; i < particles; i++)
		total += weight[i] = exp(-(error[i] - best) / temperature);
	for (int d = 0; d < DIMS; d++) {
		estimate[d] = 0;
		for (int i = 0; i < particles; i++)
			estimate[d] += weight[i] / total * pose[i][d];
	}
	/* Systematic resampling, then noise that shrinks with every layer. */
	double step = total / particles, at = step * paper_uniform(&filter_rng), sum = weight[0];
	double noise = layer + 1 < LAYERS ? layer_noise[layer + 1] : layer_noise[0];
	for (int i = 0, j = 0; i < particles; i++, at += step) {
		while (sum < at && j < particles - 1)
			sum += weight[++j];
		for (int d = 0; d < DIMS; d += 2) {
			double u = paper_uniform(&filter_rng), v = paper_uniform(&filter_rng);
			double r = sqrt(-2 * log(u > 0 ? u : 1e-300));
			next_pose[i][d] = pose[j][d] + noise * noise_scale[d] * r * cos(2 * M_PI * v);
			if (d + 1 < DIMS)
				next_pose[i][d + 1] = pose[j][d + 1] + noise * noise_scale[d + 1] * r * sin(2 * M_PI * v);
		}
	}
	free(weight);
	double (*swap)[DIMS] = pose;
	pose = next_pose, next_pose = swap;
}

static void compare(void)
{
	double a[SEGMENTS][4], b[SEGMENTS][4], sum = 0, worst = 0;
	segments(truth, a), segments(estimate, b);
	for (int s = 0; s < SEGMENTS; s++)
		for (int e = 0; e < 4; e += 2) {
			double d = hypot(a[s][e] - b[s][e], a[s][e + 1] - b[s][e + 1]);
			sum += d / (2 * SEGMENTS), worst = fmax(worst, d);
		}
	mean_err_sum += sum;
	worst_err = fmax(worst_err, sum);
}

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	long rows = (long)CAMERAS * height, r0 = rows * t / nthreads, r1 = rows * (t + 1) / nthreads;
	for (int f = 0; f < frames; f++) {
		paper_progress((f + 0.0) / frames, "render");
		if (t == 0)
			true_pose(f, truth);
		pthread_barrier_wait(&barrier);
		render(f, r0, r1);
		pthread_barrier_wait(&barrier);
		paper_progress((f + 0.3) / frames, "filter");
		smooth_pass(image, smooth_tmp, 0, r0, r1);
		pthread_barrier_wait(&barrier);
		smooth_pass(smooth_tmp, smooth, 1, r0, r1);
		pthread_barrier_wait(&barrier);
		edges(t, r0, r1);
		if (pthread_barrier_wait(&barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
			for (int c = 0; c < CAMERAS; c++) {
				edge_norm[c] = 1e-6f;
				for (int k = 0; k < nthreads; k++)
					edge_norm[c] = fmaxf(edge_norm[c], 0.5f * edge_max[k][c]);
			}
			ticket = 0;
		}
		pthread_barrier_wait(&barrier);
		for (int layer = 0; layer < LAYERS; layer++) {
			double base = (f + 0.4 + 0.6 * layer / LAYERS) / frames;
			for (;;) {
				int first = __atomic_fetch_add(&ticket, CHUNK, __ATOMIC_RELAXED);
				if (first >= particles)
					break;
				paper_progress(base + 0.6 / LAYERS / frames * first / particles, "track");
				for (int i = first; i < first + CHUNK && i < particles; i++)
					error[i] = score(pose[i]);
			}
			if (pthread_barrier_wait(&barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
				resample(layer);
				ticket = 0;
				if (layer == LAYERS - 1)
					compare();
			}
			pthread_barrier_wait(&barrier);
		}
	}
	paper_progress_end("track");
	return NULL;
}

int main(int argc, char **argv)
{
	enum paper_size size;
	paper_args(argc, argv, "pose", &nthreads, &size);
	frames = PAPER_BY_SIZE(size, 4, 32, 100);
	particles = PAPER_BY_SIZE(size, 500, 2000, 4000);
	width = PAPER_BY_SIZE(size, 160, 320, 640);
	height = width * 3 / 4;
	double zoom = width / 160.0;
	for (int c = 0; c < CAMERAS; c++) {
		double scale = zoom * (0.9 + 0.1 * c), turn = 0.15 * (c - 1.5), shear = 0.08 * (c % 2 ? 1 : -1);
		/* y up in the world, down in the image. */
		cams[c] = (struct camera){ scale * cos(turn), scale * (sin(turn) + shear), scale * sin(turn), -scale * cos(turn),
					   width / 2.0, height * 0.55 };
	}
	long pixels = (long)CAMERAS * width * height;
	image = malloc(pixels * sizeof(float)), smooth_tmp = malloc(pixels * sizeof(float));
	smooth = malloc(pixels * sizeof(float)), edge = malloc(pixels * sizeof(float)), fg = malloc(pixels * sizeof(float));
	pose = malloc(particles * sizeof *pose), next_pose = malloc(particles * sizeof *pose);
	error = malloc(particles * sizeof *error);
	filter_rng = paper_seed(6);
	/* The filter starts where the figure is, as bodytrack starts from a given pose. */
	true_pose(0, truth);
	for (int i = 0; i < particles; i++)
		memcpy(pose[i], truth, sizeof truth);

	pthread_barrier_init(&barrier, NULL, nthreads);
	paper_roi(nthreads, worker);

	double mean = mean_err_sum / frames;
	paper_check(mean < RADIUS / 3 && worst_err < RADIUS, "pose tracked over %d frames: end points off by %.2f on average, %.2f in the worst frame (half thickness %.0f)",
		    frames, mean, worst_err, RADIUS);
	printf("final pose: %.4f %.4f %.4f %.4f %.4f %.4f %.4f\n", estimate[0], estimate[1], estimate[2], estimate[3], estimate[4], estimate[5], estimate[6]);
	return paper_finish();
}
