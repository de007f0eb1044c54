/* Global snapshots a cut check must tell apart, on 2 ranks (breakpoints level 1 class 1,
 * ids 1-3, captured by every rank):
 *
 *   G1 (id 1)  before any message: consistent, nothing in flight
 *   G2 (id 2)  rank 0 has sent m1 (tag 1), rank 1 has not received it yet: consistent,
 *              m1 in flight
 *   G3 (id 3)  rank 0 has not sent m2 (tag 2) yet, rank 1 has received it: inconsistent,
 *              m2 received before the cut but sent after it
 *
 * Rank 1 prints the values it received; `received` holds their sum in every snapshot.
 */
#include <mpi.h>
#include <sdt.h>
#include <stdio.h>

volatile long received;

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	long m1 = 1000 + rank, m2 = 2000 + rank, got = 0;
	SetBreakpoint(1, 1, 1, 0, "cut=before-messages");
	if (rank == 0) {
		MPI_Send(&m1, 1, MPI_LONG, 1, 1, MPI_COMM_WORLD); /* m1-send */
		SetBreakpoint(1, 1, 2, 0, "cut=m1-in-flight");
		SetBreakpoint(1, 1, 3, 0, "cut=m2-orphan");
		MPI_Send(&m2, 1, MPI_LONG, 1, 2, MPI_COMM_WORLD); /* m2-send */
	} else {
		SetBreakpoint(1, 1, 2, 0, "cut=m1-in-flight");
		MPI_Recv(&got, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* m1-recv */
		received += got;
		MPI_Recv(&got, 1, MPI_LONG, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* m2-recv */
		received += got;
		SetBreakpoint(1, 1, 3, 0, "cut=m2-orphan");
		printf("rank 1 received %ld\n", received);
	}
	MPI_Finalize();
	return 0;
}
