/*
 * A job for `mpirun -np N sdt run -- job_ranks`: each rank computes a value of its own,
 * prints "rank R of N on HOST value V", passes one breakpoint (S0) with it in the global
 * `rank_value`, then passes its value round a ring of ranks (MPI_Sendrecv) and checks
 * what it got from its left neighbour before a second breakpoint (S1), where the
 * global `left_value` holds it. Prints "rank R ok" and exits 0 when the ring agreed.
 *   usage: mpirun -np N job_ranks
 */
#include <stdio.h>
#include <unistd.h>

#include <mpi.h>
#include <sdt.h>

long rank_value;
long left_value;

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);

	rank_value = 1000 + 37 * rank;
	printf("rank %d of %d on %s value %ld\n", rank, size, host, rank_value);
	fflush(stdout);
	SetBreakpoint(1, 0, 1, 0, "phase=start");

	int right = (rank + 1) % size, left = (rank + size - 1) % size;
	MPI_Sendrecv(&rank_value, 1, MPI_LONG, right, 7, &left_value, 1, MPI_LONG, left, 7, MPI_COMM_WORLD,
		     MPI_STATUS_IGNORE);
	SetBreakpoint(1, 0, 2, 0, "phase=ring");

	int ok = left_value == 1000 + 37 * left;
	printf("rank %d %s\n", rank, ok ? "ok" : "WRONG");
	MPI_Finalize();
	return ok ? 0 : 1;
}
