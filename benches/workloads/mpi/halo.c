/* A 2-D halo exchange: the ranks form a PX x PY grid (periodic), each owns an N x N block
 * of doubles, and every iteration sends its four edges to its neighbours (Isend/Irecv,
 * Waitall), then relaxes the block (Jacobi); every 50 iterations an Allreduce of the
 * residual. Prints the seconds the iterations took on rank 0 (MPI_Wtime) and the final
 * residual.
 *
 *   mpirun -np N ./halo [ITERATIONS] [BLOCK]     (20000 and 64 by default)
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int iterations = argc > 1 ? atoi(argv[1]) : 20000;
	int n = argc > 2 ? atoi(argv[2]) : 64;
	int dims[2] = {0, 0}, periods[2] = {1, 1};
	MPI_Dims_create(size, 2, dims);
	MPI_Comm grid;
	MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
	int up, down, left, right;
	MPI_Cart_shift(grid, 0, 1, &up, &down);
	MPI_Cart_shift(grid, 1, 1, &left, &right);

	/* (n+2) x (n+2) with a ghost border. */
	int w = n + 2;
	double *a = calloc((size_t)w * w, sizeof *a), *b = calloc((size_t)w * w, sizeof *b);
	double *col_out[2], *col_in[2];
	for (int i = 0; i < 2; i++) {
		col_out[i] = malloc(n * sizeof(double));
		col_in[i] = malloc(n * sizeof(double));
	}
	for (int i = 1; i <= n; i++)
		for (int j = 1; j <= n; j++)
			a[i * w + j] = (double)((rank * 7 + i * 3 + j) % 17);

	MPI_Barrier(grid);
	double start = MPI_Wtime(), residual = 0;
	for (int it = 0; it < iterations; it++) {
		MPI_Request req[8];
		for (int i = 0; i < n; i++) {
			col_out[0][i] = a[(i + 1) * w + 1];
			col_out[1][i] = a[(i + 1) * w + n];
		}
		MPI_Irecv(&a[0 * w + 1], n, MPI_DOUBLE, up, 0, grid, &req[0]);
		MPI_Irecv(&a[(n + 1) * w + 1], n, MPI_DOUBLE, down, 1, grid, &req[1]);
		MPI_Irecv(col_in[0], n, MPI_DOUBLE, left, 2, grid, &req[2]);
		MPI_Irecv(col_in[1], n, MPI_DOUBLE, right, 3, grid, &req[3]);
		MPI_Isend(&a[1 * w + 1], n, MPI_DOUBLE, up, 1, grid, &req[4]);
		MPI_Isend(&a[n * w + 1], n, MPI_DOUBLE, down, 0, grid, &req[5]);
		MPI_Isend(col_out[0], n, MPI_DOUBLE, left, 3, grid, &req[6]);
		MPI_Isend(col_out[1], n, MPI_DOUBLE, right, 2, grid, &req[7]);
		MPI_Waitall(8, req, MPI_STATUSES_IGNORE);
		for (int i = 0; i < n; i++) {
			a[(i + 1) * w + 0] = col_in[0][i];
			a[(i + 1) * w + n + 1] = col_in[1][i];
		}
		double local = 0;
		for (int i = 1; i <= n; i++)
			for (int j = 1; j <= n; j++) {
				double v = 0.25 * (a[(i - 1) * w + j] + a[(i + 1) * w + j] + a[i * w + j - 1] + a[i * w + j + 1]);
				local += fabs(v - a[i * w + j]);
				b[i * w + j] = v;
			}
		double *t = a;
		a = b;
		b = t;
		if (it % 50 == 49)
			MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, grid);
	}
	double seconds = MPI_Wtime() - start;
	if (rank == 0)
		printf("halo: %d iterations of %dx%d blocks on %dx%d ranks in %.6f s, residual %.6g\n", iterations, n, n,
		       dims[0], dims[1], seconds, residual);
	MPI_Comm_free(&grid);
	MPI_Finalize();
	return 0;
}
