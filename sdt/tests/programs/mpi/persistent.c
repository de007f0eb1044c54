/* Persistent requests and matched probes, on 3 ranks: the interposition library carries
 * their messages in a type made at their init, or receives them off a matched message.
 *
 *   rank 0  sends ROUNDS rounds to rank 1 with persistent sends (four ints, and a large
 *           block with MPI_Ssend_init), started together (MPI_Startall), then takes rank
 *           1's answer with a plain MPI_Recv; afterwards it sends rank 2 two messages
 *   rank 1  takes each round with persistent receives (the large one from
 *           MPI_ANY_SOURCE) and answers with a persistent send (MPI_Start)
 *   rank 2  takes rank 0's messages with MPI_Mprobe/MPI_Mrecv and
 *           MPI_Improbe/MPI_Imrecv
 *
 * Each rank prints what it got and MPI_Get_count's answer: the same with and without SDT.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define ROUNDS 3
#define LARGE 50000

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, count;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Status status;
	int small[4];
	double *large = malloc(LARGE * sizeof *large);
	if (rank == 0) {
		MPI_Request sends[2];
		MPI_Send_init(small, 4, MPI_INT, 1, 1, MPI_COMM_WORLD, &sends[0]);
		MPI_Ssend_init(large, LARGE, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD, &sends[1]);
		for (int round = 0; round < ROUNDS; round++) {
			for (int i = 0; i < 4; i++)
				small[i] = round * 10 + i;
			for (int i = 0; i < LARGE; i++)
				large[i] = round + i * 0.5;
			MPI_Startall(2, sends);
			MPI_Waitall(2, sends, MPI_STATUSES_IGNORE);
			int answer = 0;
			MPI_Recv(&answer, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, &status);
			MPI_Get_count(&status, MPI_INT, &count);
			printf("rank 0: round %d answer %d (%d int)\n", round, answer, count);
		}
		MPI_Request_free(&sends[0]);
		MPI_Request_free(&sends[1]);
		int a = 41, b[3] = { 7, 8, 9 };
		MPI_Send(&a, 1, MPI_INT, 2, 4, MPI_COMM_WORLD);
		MPI_Send(b, 3, MPI_INT, 2, 5, MPI_COMM_WORLD);
	} else if (rank == 1) {
		MPI_Request receives[2], answering;
		int answer = 0;
		MPI_Recv_init(small, 4, MPI_INT, 0, 1, MPI_COMM_WORLD, &receives[0]);
		MPI_Recv_init(large, LARGE, MPI_DOUBLE, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &receives[1]);
		MPI_Send_init(&answer, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, &answering);
		for (int round = 0; round < ROUNDS; round++) {
			MPI_Status statuses[2];
			MPI_Startall(2, receives);
			MPI_Waitall(2, receives, statuses);
			int ints = 0, doubles = 0;
			MPI_Get_count(&statuses[0], MPI_INT, &ints);
			MPI_Get_count(&statuses[1], MPI_DOUBLE, &doubles);
			double sum = 0;
			for (int i = 0; i < doubles; i++)
				sum += large[i];
			printf("rank 1: round %d got %d ints (%d..%d) and %d doubles from %d, sum %.1f\n", round, ints,
			       small[0], small[3], doubles, statuses[1].MPI_SOURCE, sum);
			answer = small[3] * 2;
			MPI_Start(&answering);
			MPI_Wait(&answering, MPI_STATUS_IGNORE);
		}
		MPI_Request_free(&receives[0]);
		MPI_Request_free(&receives[1]);
		MPI_Request_free(&answering);
	} else if (rank == 2) {
		MPI_Message message;
		MPI_Mprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &message, &status);
		MPI_Get_count(&status, MPI_INT, &count);
		int a = 0;
		MPI_Mrecv(&a, 1, MPI_INT, &message, &status);
		printf("rank 2: probed %d int, got %d with tag %d\n", count, a, status.MPI_TAG);
		int flag = 0;
		while (!flag)
			MPI_Improbe(MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &flag, &message, &status);
		MPI_Get_count(&status, MPI_INT, &count);
		int b[3] = { 0 };
		MPI_Request request;
		MPI_Imrecv(b, 3, MPI_INT, &message, &request);
		MPI_Wait(&request, &status);
		MPI_Get_count(&status, MPI_INT, &count);
		printf("rank 2: probed and got %d ints from %d: %d %d %d\n", count, status.MPI_SOURCE, b[0], b[1], b[2]);
	}
	MPI_Finalize();
	free(large);
	return 0;
}
