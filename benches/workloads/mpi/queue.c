/* A master–worker queue, the pattern of Monte Carlo transport codes: rank 0 hands out
 * TASKS tasks, takes each result with MPI_ANY_SOURCE and gives the worker that answered
 * the next task; each task is a short random walk. Prints the seconds it took on rank 0
 * (MPI_Wtime) and a checksum that depends on who answered when.
 *
 *   mpirun -np N ./queue [TASKS]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double walk(long task)
{
	unsigned long x = 0x9E3779B97F4A7C15ul * (unsigned long)(task + 1);
	double at = 0;
	for (int step = 0; step < 20000; step++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		at += (x & 1) ? 1.0 : -1.0;
	}
	return at;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long tasks = argc > 1 ? atol(argv[1]) : 2000;
	double start = MPI_Wtime();
	if (rank == 0) {
		long next = 0, done = 0;
		unsigned long checksum = 0;
		for (int w = 1; w < size; w++) {
			long task = next < tasks ? next++ : -1;
			MPI_Send(&task, 1, MPI_LONG, w, 1, MPI_COMM_WORLD);
		}
		while (done < tasks) {
			double result;
			MPI_Status status;
			MPI_Recv(&result, 1, MPI_DOUBLE, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &status);
			done++;
			checksum = checksum * 31 + (unsigned long)status.MPI_SOURCE;
			long task = next < tasks ? next++ : -1;
			MPI_Send(&task, 1, MPI_LONG, status.MPI_SOURCE, 1, MPI_COMM_WORLD);
		}
		printf("queue: %ld tasks in %.6f s, checksum %lx\n", tasks, MPI_Wtime() - start, checksum);
	} else {
		for (;;) {
			long task;
			MPI_Recv(&task, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			if (task < 0)
				break;
			double result = walk(task);
			MPI_Send(&result, 1, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
		}
	}
	MPI_Finalize();
	return 0;
}
