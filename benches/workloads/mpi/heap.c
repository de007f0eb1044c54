/* Every rank owns HEAP_MB of random numbers and, SNAPSHOTS times, rewrites DIRTY% of its
 * pages, meets the others at a barrier and reaches a breakpoint that captures (level 1,
 * class 1, id 1, every hit): a global snapshot of every rank per round. Run as one rank, it
 * is the same capture of a single process.
 *
 *   mpirun -np N ./heap [HEAP_MB] [DIRTY%] [SNAPSHOTS]
 */
#include <mpi.h>
#include <sdt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	size_t heap_mb = argc > 1 ? strtoul(argv[1], 0, 10) : 100;
	unsigned dirty = argc > 2 ? (unsigned)atoi(argv[2]) : 10;
	int snapshots = argc > 3 ? atoi(argv[3]) : 10;
	size_t pages = heap_mb << 8, words = pages * 512;
	uint64_t *heap = malloc(pages * 4096), x = 88172645463325252ull + (uint64_t)rank;
	for (size_t i = 0; i < words; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		heap[i] = x;
	}
	for (int s = 0; s < snapshots; s++) {
		for (size_t p = 0; p < pages; p++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			if (x % 100 < dirty)
				heap[p * 512 + x % 512] += x;
		}
		MPI_Barrier(MPI_COMM_WORLD);
		SetBreakpoint(1, 1, 1, 1, "round");
	}
	uint64_t sum = 0;
	for (size_t i = 0; i < words; i += 4099)
		sum += heap[i];
	printf("rank %d: checksum %llx\n", rank, (unsigned long long)sum);
	MPI_Finalize();
	return 0;
}
