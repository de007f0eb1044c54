/* Probes and collectives: rank 1 sends rank 0 a message whose size rank 0 learns with
 * MPI_Probe and MPI_Get_count; rank 2 one found with MPI_Iprobe; then every rank takes
 * part in Bcast, Reduce, Allreduce, Gather, Scatter, Allgather, Alltoall, Scan and a
 * Barrier, on MPI_COMM_WORLD and on a split communicator, a Sendrecv around the ring,
 * and a non-blocking Iallreduce and Ibarrier completed by one Waitall. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (rank == 0) {
		MPI_Status status;
		int count;
		MPI_Probe(1, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
		MPI_Get_count(&status, MPI_DOUBLE, &count);
		double *data = malloc(sizeof(double) * (size_t)count);
		MPI_Recv(data, count, MPI_DOUBLE, 1, status.MPI_TAG, MPI_COMM_WORLD, &status);
		printf("probe: %d doubles tag %d, last %g\n", count, status.MPI_TAG, data[count - 1]);
		int flag = 0;
		while (!flag)
			MPI_Iprobe(MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &flag, &status);
		MPI_Get_count(&status, MPI_CHAR, &count);
		char text[64];
		MPI_Recv(text, sizeof text, MPI_CHAR, status.MPI_SOURCE, 5, MPI_COMM_WORLD, &status);
		printf("iprobe: %d chars from %d: %s\n", count, status.MPI_SOURCE, text);
	} else if (rank == 1) {
		double data[7] = { 1, 2, 3, 4, 5, 6, 7.5 };
		MPI_Send(data, 7, MPI_DOUBLE, 0, 42, MPI_COMM_WORLD);
	} else if (rank == 2) {
		MPI_Send("hello", 6, MPI_CHAR, 0, 5, MPI_COMM_WORLD);
	}
	int value = rank + 1, sum = 0, max = 0, prefix = 0, root = size - 1;
	MPI_Bcast(&value, 1, MPI_INT, root, MPI_COMM_WORLD);
	value = rank + 1;
	MPI_Reduce(&value, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Allreduce(&value, &max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	MPI_Scan(&value, &prefix, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	int *all = malloc(sizeof(int) * (size_t)size), *back = malloc(sizeof(int) * (size_t)size);
	MPI_Gather(&value, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Scatter(all, 1, MPI_INT, &value, 1, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Allgather(&value, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
	MPI_Alltoall(all, 1, MPI_INT, back, 1, MPI_INT, MPI_COMM_WORLD);
	MPI_Comm half;
	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
	int half_sum = 0;
	MPI_Allreduce(&value, &half_sum, 1, MPI_INT, MPI_SUM, half);
	MPI_Barrier(half);
	MPI_Comm_free(&half);
	int left = 0;
	MPI_Status status;
	MPI_Sendrecv(&value, 1, MPI_INT, (rank + 1) % size, 9, &left, 1, MPI_INT, (rank + size - 1) % size, 9,
		     MPI_COMM_WORLD, &status);
	int count;
	MPI_Get_count(&status, MPI_INT, &count);
	/* Non-blocking collectives, completed after a message around the ring whose send a
	 * wait completes. */
	MPI_Request posted[2], sent;
	int total = 0, right = 0;
	MPI_Iallreduce(&value, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &posted[0]);
	MPI_Ibarrier(MPI_COMM_WORLD, &posted[1]);
	MPI_Isend(&value, 1, MPI_INT, (rank + size - 1) % size, 11, MPI_COMM_WORLD, &sent);
	MPI_Recv(&right, 1, MPI_INT, (rank + 1) % size, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Wait(&sent, MPI_STATUS_IGNORE);
	MPI_Waitall(2, posted, MPI_STATUSES_IGNORE);
	printf("rank %d: sum %d max %d prefix %d half %d left %d count %d total %d right %d\n", rank, sum, max, prefix,
	       half_sum, left, count, total, right);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
