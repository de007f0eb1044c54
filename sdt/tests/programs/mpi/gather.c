/* Every other rank sends rank 0 a few messages of different sizes and tags; rank 0
 * receives them with MPI_ANY_SOURCE / MPI_ANY_TAG through non-blocking receives and
 * MPI_Waitany, and prints each message's source, tag and MPI_Get_count, sorted. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_RANK 3
#define MAX 64

static int by_text(const void *a, const void *b)
{
	return strcmp(a, b);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (rank == 0) {
		int n = (size - 1) * PER_RANK;
		int (*bufs)[MAX] = calloc((size_t)n, sizeof *bufs);
		MPI_Request *requests = malloc(sizeof(MPI_Request) * (size_t)n);
		char (*lines)[80] = calloc((size_t)n, sizeof *lines);
		for (int i = 0; i < n; i++)
			MPI_Irecv(bufs[i], MAX, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &requests[i]);
		for (int done = 0; done < n; done++) {
			int index, count;
			MPI_Status status;
			MPI_Waitany(n, requests, &index, &status);
			MPI_Get_count(&status, MPI_INT, &count);
			snprintf(lines[done], sizeof lines[done], "from %d tag %d count %d first %d", status.MPI_SOURCE,
				 status.MPI_TAG, count, bufs[index][0]);
		}
		qsort(lines, (size_t)n, sizeof *lines, by_text);
		for (int i = 0; i < n; i++)
			printf("%s\n", lines[i]);
	} else {
		int data[MAX];
		for (int k = 0; k < PER_RANK; k++) {
			int count = 1 + rank * 4 + k;
			for (int i = 0; i < count; i++)
				data[i] = rank * 100 + k;
			MPI_Send(data, count, MPI_INT, 0, 10 + k, MPI_COMM_WORLD);
		}
	}
	MPI_Finalize();
	return 0;
}
