/* Message races that decide what a job prints, on 3 or more ranks.
 *
 *   sum    every rank but 0 sends COUNT doubles: rank 1 ±1e16 in turn, the others small
 *          ones; rank 0 adds them up in arrival order (MPI_ANY_SOURCE), and a small value
 *          that comes while 1e16 is in the sum is lost to rounding: the printed sum
 *          depends on the order. Every rank breaks at (1, 1, 1) halfway (rank 0 after half
 *          the values, the others after sending theirs), with `total` its sum so far.
 *          With a file named "withhold" in the working directory, rank 2 sends nothing:
 *          a replay of a run where it sent waits for its values for ever.
 *   queue  rank 0 hands out TASKS tasks and takes each result with a posted
 *          MPI_ANY_SOURCE receive, giving the worker that answered the next task; it
 *          prints a checksum of who answered when.
 *
 * The workers wait a little, at random, between messages, so that runs differ.
 */
#include <mpi.h>
#include <sdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define COUNT 20
#define TASKS 40

double total;
unsigned long checksum;

static void jitter(void)
{
	usleep((useconds_t)(rand() % 400));
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	srand((unsigned)(now.tv_nsec ^ (rank * 7919)));
	const char *mode = argc > 1 ? argv[1] : "sum";
	if (!strcmp(mode, "sum")) {
		int values = COUNT * (size - 1);
		if (rank == 0) {
			for (int i = 0; i < values; i++) {
				double x;
				MPI_Recv(&x, 1, MPI_DOUBLE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				total += x;
				if (i + 1 == values / 2)
					SetBreakpoint(1, 1, 1, 0, "half");
			}
			printf("sum %.17g\n", total);
		} else {
			int withhold = rank == 2 && access("withhold", F_OK) == 0;
			for (int i = 0; i < COUNT && !withhold; i++) {
				double x = rank == 1 ? (i % 2 ? -1e16 : 1e16) : 1.0 + 0.25 * rank;
				jitter();
				MPI_Send(&x, 1, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD);
				total += x;
			}
			SetBreakpoint(1, 1, 1, 0, "half");
		}
	} else {
		if (rank == 0) {
			int handed = 0, done = 0, stop = -1;
			for (int w = 1; w < size; w++, handed++)
				MPI_Send(&handed, 1, MPI_INT, w, 1, MPI_COMM_WORLD);
			while (done < TASKS) {
				int result;
				MPI_Request request;
				MPI_Status status;
				MPI_Irecv(&result, 1, MPI_INT, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &request);
				MPI_Wait(&request, &status);
				done++;
				checksum = checksum * 31 + (unsigned long)status.MPI_SOURCE;
				if (handed < TASKS) {
					int next = handed++;
					MPI_Send(&next, 1, MPI_INT, status.MPI_SOURCE, 1, MPI_COMM_WORLD);
				}
			}
			for (int w = 1; w < size; w++)
				MPI_Send(&stop, 1, MPI_INT, w, 1, MPI_COMM_WORLD);
			printf("checksum %lu\n", checksum);
		} else {
			for (;;) {
				int task;
				MPI_Recv(&task, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				if (task < 0)
					break;
				jitter();
				int result = task * task;
				MPI_Send(&result, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
			}
		}
	}
	MPI_Finalize();
	return 0;
}
