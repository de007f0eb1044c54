/* A token around the ring, ROUNDS times (argv[1], default 3): rank 0 starts it, every
 * rank adds its rank and passes it on. Each rank prints, at the end, what it last
 * received, from whom, and MPI_Get_count of it; rank 0 prints the time taken on stderr. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Called after every round: where `sdt run --break round_done@N` takes snapshots. */
__attribute__((noinline)) void round_done(long round)
{
	__asm__ volatile("" ::"r"(round) : "memory");
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long rounds = argc > 1 ? atol(argv[1]) : 3;
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	long token[2] = { 0, 0 };
	MPI_Status status;
	int count = -1;
	double start = MPI_Wtime();
	for (long round = 0; round < rounds; round++) {
		if (rank == 0) {
			token[0] = round;
			MPI_Send(token, 2, MPI_LONG, next, 1, MPI_COMM_WORLD);
			MPI_Recv(token, 2, MPI_LONG, prev, 1, MPI_COMM_WORLD, &status);
		} else {
			MPI_Recv(token, 2, MPI_LONG, prev, 1, MPI_COMM_WORLD, &status);
			token[1] += rank;
			MPI_Send(token, 2, MPI_LONG, next, 1, MPI_COMM_WORLD);
		}
		MPI_Get_count(&status, MPI_LONG, &count);
		round_done(round);
	}
	printf("rank %d: %ld rounds, last token %ld,%ld from %d count %d\n", rank, rounds, token[0], token[1],
	       status.MPI_SOURCE, count);
	if (rank == 0)
		fprintf(stderr, "ring: %ld rounds of %d ranks in %.3f s\n", rounds, size, MPI_Wtime() - start);
	MPI_Finalize();
	return 0;
}
