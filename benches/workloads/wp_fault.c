/*
 * What a write-protected page costs the program that writes it: userfaultfd's
 * asynchronous write-protect (the mode SDT's write tracking uses, Linux 6.7) over
 * 256 MiB, then one write per page, three times, beside the same writes unprotected.
 *
 *   gcc -O2 benches/workloads/wp_fault.c -o /tmp/wp_fault && /tmp/wp_fault [STRIDE]
 *
 * STRIDE: bytes between two writes (default 4096: every page).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

#define LEN ((size_t)256 << 20)

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* Milliseconds to write one byte every `stride` bytes of `p`. */
static double write_all(char *p, size_t stride)
{
	double start = now_ms();
	for (size_t i = 0; i < LEN; i += stride)
		p[i]++;
	return now_ms() - start;
}

int main(int argc, char **argv)
{
	size_t stride = argc > 1 ? strtoul(argv[1], NULL, 0) : 4096;
	if (stride == 0)
		stride = 4096;
	char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return perror("mmap"), 1;
	write_all(p, 4096); /* every page in place */
	printf("unprotected: %.1f ms\n", write_all(p, stride));

	int fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	struct uffdio_api api = { .api = UFFD_API,
				  .features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED };
	struct uffdio_register reg = { .range = { (unsigned long)p, LEN }, .mode = UFFDIO_REGISTER_MODE_WP };
	if (fd < 0 || ioctl(fd, UFFDIO_API, &api) || ioctl(fd, UFFDIO_REGISTER, &reg))
		return perror("userfaultfd with async write-protect"), 1;
	for (int round = 0; round < 3; round++) {
		struct uffdio_writeprotect wp = { .range = { (unsigned long)p, LEN },
						  .mode = UFFDIO_WRITEPROTECT_MODE_WP };
		double start = now_ms();
		if (ioctl(fd, UFFDIO_WRITEPROTECT, &wp))
			return perror("UFFDIO_WRITEPROTECT"), 1;
		double protect = now_ms() - start;
		double first = write_all(p, stride);
		double again = write_all(p, stride);
		printf("protect %.1f ms; first writes %.1f ms (%.2f us a page); again %.1f ms\n", protect,
		       first, first * 1e3 / (LEN / stride), again);
	}
	return 0;
}
