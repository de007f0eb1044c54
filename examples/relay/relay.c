/* relay: an MPI job for SDT's message history and global snapshots.
 *
 * The ranks form a ring. Each first sends its value to its right neighbour and receives
 * its left neighbour's; then a running total travels once around the ring, from rank 0
 * back to rank 0, which prints it. Three breakpoints every rank reaches make three
 * global snapshots:
 *
 *   G1 (id 1)  before any message: consistent
 *   G2 (id 2)  every rank has sent its value, none has received one: consistent, with
 *              one message per rank in flight
 *   G3 (id 3)  rank 0 waits to send the total, while the others have received it from
 *              their left: inconsistent (those messages were received before the cut
 *              but sent after it)
 *
 *   mpicc -g -I ../../sdt-lib/include relay.c ../../target/release/libsdt.a -ldl -lpthread -o relay
 *   mpirun -np 3 sdt run -- ./relay
 */
#include <mpi.h>
#include <sdt.h>
#include <stdio.h>

long value, total;

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int right = (rank + 1) % size, left = (rank + size - 1) % size;
	long got = 0;
	SetBreakpoint(1, 1, 1, 0, "phase=start");
	value = 10 * (rank + 1);
	MPI_Send(&value, 1, MPI_LONG, right, 1, MPI_COMM_WORLD);
	SetBreakpoint(1, 1, 2, 0, "phase=values-sent");
	MPI_Recv(&got, 1, MPI_LONG, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	value += got;
	if (rank == 0) {
		total = value;
		SetBreakpoint(1, 1, 3, 0, "phase=total");
		MPI_Send(&total, 1, MPI_LONG, right, 2, MPI_COMM_WORLD);
		MPI_Recv(&total, 1, MPI_LONG, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		printf("total %ld\n", total);
	} else {
		MPI_Recv(&total, 1, MPI_LONG, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		total += value;
		SetBreakpoint(1, 1, 3, 0, "phase=total");
		MPI_Send(&total, 1, MPI_LONG, right, 2, MPI_COMM_WORLD);
	}
	MPI_Finalize();
	return 0;
}
