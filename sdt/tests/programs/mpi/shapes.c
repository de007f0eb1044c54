/* Messages of every shape the interposition library carries differently, on 3 ranks:
 * small ones of predefined types (packed with their piggyback), derived types and large
 * messages (wrapped in a derived type), the two kinds meeting each other, and sends
 * whose requests the program frees at once (MPI_Request_free). Each receiver prints what
 * it got and MPI_Get_count's answer: the same with and without SDT.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define LARGE 100000

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, count;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Status status;
	MPI_Datatype ten, every_other;
	MPI_Type_contiguous(10, MPI_INT, &ten);
	MPI_Type_commit(&ten);
	MPI_Type_vector(5, 1, 2, MPI_INT, &every_other);
	MPI_Type_commit(&every_other);
	int small[10], strided[10];
	double *large = malloc(LARGE * sizeof *large);
	int *medium = malloc(2000 * sizeof *medium);
	if (rank == 0) {
		for (int i = 0; i < 10; i++)
			small[i] = i * i;
		/* Packed send, received into a derived type. */
		MPI_Send(small, 10, MPI_INT, 1, 1, MPI_COMM_WORLD);
		/* A derived type sent, received packed. */
		MPI_Recv(small, 10, MPI_INT, 1, 2, MPI_COMM_WORLD, &status);
		MPI_Get_count(&status, MPI_INT, &count);
		printf("rank 0: got %d ints from a vector: %d %d %d %d %d\n", count, small[0], small[1], small[2], small[3],
		       small[4]);
		/* A large message, and a medium one whose request is freed at once. */
		for (int i = 0; i < LARGE; i++)
			large[i] = i * 0.5;
		MPI_Send(large, LARGE, MPI_DOUBLE, 2, 3, MPI_COMM_WORLD);
		MPI_Request freed;
		for (int i = 0; i < 2000; i++)
			medium[i] = 3 * i;
		MPI_Isend(medium, 2000, MPI_INT, 2, 4, MPI_COMM_WORLD, &freed);
		MPI_Request_free(&freed);
		int tiny = 0;
		MPI_Recv(&tiny, 1, MPI_INT, 2, 5, MPI_COMM_WORLD, &status);
		printf("rank 0: got %d from a freed request\n", tiny);
	} else if (rank == 1) {
		MPI_Recv(strided, 1, ten, 0, 1, MPI_COMM_WORLD, &status);
		MPI_Get_count(&status, ten, &count);
		int elements = 0;
		MPI_Get_elements(&status, MPI_INT, &elements);
		printf("rank 1: got %d block(s), %d ints, last %d\n", count, elements, strided[9]);
		for (int i = 0; i < 10; i++)
			strided[i] = 100 + i;
		MPI_Send(strided, 1, every_other, 0, 2, MPI_COMM_WORLD);
	} else if (rank == 2) {
		MPI_Request request;
		MPI_Irecv(large, LARGE, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD, &request);
		MPI_Wait(&request, &status);
		MPI_Get_count(&status, MPI_DOUBLE, &count);
		double sum = 0;
		for (int i = 0; i < count; i++)
			sum += large[i];
		printf("rank 2: got %d doubles, sum %.1f\n", count, sum);
		MPI_Recv(medium, 2000, MPI_INT, 0, 4, MPI_COMM_WORLD, &status);
		MPI_Get_count(&status, MPI_INT, &count);
		printf("rank 2: got %d ints, last %d\n", count, medium[count - 1]);
		int tiny = 77;
		MPI_Request freed;
		MPI_Isend(&tiny, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, &freed);
		MPI_Request_free(&freed);
	}
	MPI_Type_free(&ten);
	MPI_Type_free(&every_other);
	MPI_Finalize();
	free(large);
	free(medium);
	return 0;
}
