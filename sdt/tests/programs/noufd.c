/*
 * Runs a program where userfaultfd(2) does not exist: installs a seccomp filter that
 * fails it with ENOSYS, then execs the rest of the command line. For testing SDT's
 * fallback on kernels without write tracking, with sdt run without CAP_SYS_ADMIN (with
 * it, sdt suspends the filter for the calls it makes in the program).
 *   usage: noufd PROG ARGS...
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_userfaultfd, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };
	if (argc < 2) {
		fprintf(stderr, "usage: noufd PROG ARGS...\n");
		return 2;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccomp");
		return 2;
	}
	execv(argv[1], argv + 1);
	perror("execv");
	return 127;
}
