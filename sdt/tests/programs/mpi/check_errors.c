/* Errors `sdt check` must find, one per mode, on 3 ranks. Each faulty call's line carries
 * a marker comment the test looks for.
 *
 *   clean      rank 0 sends to 1 and 2, which receive; a barrier; all finalize
 *   deadlock   ranks 0 and 1 each receive from the other first (blocked for ever); rank 2
 *              finalizes. The job is ended by mpirun's --timeout.
 *   unmatched  rank 0 sends rank 1 a message (tag 99) that rank 1 never receives
 *   truncate   rank 0 sends 100 ints to rank 2, which receives into 10
 *   ideadlock  ranks 0 and 2 wait for an Ibarrier that rank 1, receiving from rank 0
 *              first, never joins (blocked for ever, ended by mpirun's --timeout)
 *   abort      rank 1 calls MPI_Abort with error code 3 once ranks 0 and 2 wait to
 *              receive from it
 *   mismatch   rank 0 calls MPI_Barrier where ranks 1 and 2 post an MPI_Ibarrier and wait
 *              for it: they never match (blocked for ever, ended by mpirun's --timeout)
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	const char *mode = argc > 1 ? argv[1] : "clean";
	int data[100] = {0}, one = 0;
	if (!strcmp(mode, "clean")) {
		if (rank == 0) {
			MPI_Send(data, 4, MPI_INT, 1, 1, MPI_COMM_WORLD);
			MPI_Send(data, 4, MPI_INT, 2, 1, MPI_COMM_WORLD);
		} else {
			MPI_Recv(data, 4, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		}
		MPI_Barrier(MPI_COMM_WORLD);
	} else if (!strcmp(mode, "deadlock")) {
		if (rank == 0)
			MPI_Recv(&one, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* deadlock-0 */
		else if (rank == 1)
			MPI_Recv(&one, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* deadlock-1 */
		if (rank < 2)
			MPI_Send(&one, 1, MPI_INT, 1 - rank, 5, MPI_COMM_WORLD);
	} else if (!strcmp(mode, "unmatched")) {
		if (rank == 0)
			MPI_Send(&one, 1, MPI_INT, 1, 99, MPI_COMM_WORLD); /* unmatched-send */
		MPI_Barrier(MPI_COMM_WORLD);
	} else if (!strcmp(mode, "truncate")) {
		if (rank == 0)
			MPI_Send(data, 100, MPI_INT, 2, 7, MPI_COMM_WORLD);
		else if (rank == 2)
			MPI_Recv(data, 10, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* truncate-recv */
	} else if (!strcmp(mode, "ideadlock")) {
		if (rank == 1) {
			MPI_Recv(&one, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* ideadlock-1 */
			MPI_Barrier(MPI_COMM_WORLD);
		} else {
			MPI_Request all;
			MPI_Ibarrier(MPI_COMM_WORLD, &all);
			MPI_Wait(&all, MPI_STATUS_IGNORE); /* ideadlock-wait */
			if (rank == 0)
				MPI_Send(&one, 1, MPI_INT, 1, 3, MPI_COMM_WORLD);
		}
	} else if (!strcmp(mode, "mismatch")) {
		if (rank == 0) {
			MPI_Barrier(MPI_COMM_WORLD); /* mismatch-0 */
		} else {
			MPI_Request all;
			MPI_Ibarrier(MPI_COMM_WORLD, &all); /* mismatch-post */
			MPI_Wait(&all, MPI_STATUS_IGNORE); /* mismatch-wait */
		}
	} else if (!strcmp(mode, "abort")) {
		if (rank == 1) {
			for (int from = 0; from < 3; from += 2)
				MPI_Recv(&one, 1, MPI_INT, from, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			usleep(300 * 1000); /* until the others wait */
			MPI_Abort(MPI_COMM_WORLD, 3); /* abort-call */
		} else {
			MPI_Send(&one, 1, MPI_INT, 1, 8, MPI_COMM_WORLD);
			MPI_Recv(&one, 1, MPI_INT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* abort-wait */
		}
	}
	printf("rank %d: %s done\n", rank, mode);
	fflush(stdout);
	MPI_Finalize();
	return 0;
}
