/* A ring of small messages: rank r receives 8 bytes from r-1 and passes them on to r+1,
 * MESSAGES times in all (every hop is one message). Prints the seconds the ring took on
 * rank 0, measured inside the program (MPI_Wtime), and a checksum every run agrees on.
 *
 *   mpirun -np N ./ring [MESSAGES]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long messages = argc > 1 ? atol(argv[1]) : 100000;
	long laps = messages / size;
	int left = (rank + size - 1) % size, right = (rank + 1) % size;
	long token = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	double start = MPI_Wtime();
	for (long lap = 0; lap < laps; lap++) {
		if (rank == 0) {
			token++;
			MPI_Send(&token, 1, MPI_LONG, right, 1, MPI_COMM_WORLD);
			MPI_Recv(&token, 1, MPI_LONG, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(&token, 1, MPI_LONG, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			token++;
			MPI_Send(&token, 1, MPI_LONG, right, 1, MPI_COMM_WORLD);
		}
	}
	double seconds = MPI_Wtime() - start;
	if (rank == 0)
		printf("ring: %ld messages in %.6f s, token %ld\n", laps * size, seconds, token);
	MPI_Finalize();
	/* Rank 0 holds the token last: every hop added one. */
	return rank != 0 || token == laps * size ? 0 : 1;
}
