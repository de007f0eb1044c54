/*
 * Credentials a restore must give back, thread by thread.
 *
 *   usage (as root): credentials drop SECRET KEPT
 *
 * As root it drops CAP_NET_RAW from its bounding set, takes supplementary groups 1002
 * and 1004, gid 1001, real uid 1003 and effective and saved uid 1001, keeping
 * CAP_NET_BIND_SERVICE (permitted, effective, inheritable and ambient), and executes
 * itself as `credentials run SECRET KEPT`. Then it opens KEPT (which that user may
 * read) and keeps it open. A second thread takes effective uid 1003 (its real one) and
 * no_new_privs, for itself only (raw system calls: Linux keeps credentials per thread);
 * a third enters seccomp strict mode and spins; the main thread makes the process
 * dumpable again and reaches a breakpoint.
 *
 * After the breakpoint the main thread and the second print their user ids (real,
 * effective, saved, filesystem), group ids, supplementary groups and the capability,
 * NoNewPrivs and Seccomp lines of /proc/thread-self/status, and the main thread how
 * many threads are in strict mode; then the process's dumpable flag, the first line
 * of KEPT read through the kept descriptor, and what opening SECRET (a file only root
 * may read) gave: "secret: EACCES" for the user it runs as.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sdt.h>

#define CAP_NET_BIND_SERVICE 10
#define CAP_NET_RAW 13

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int stage; /* 1: the worker has its credentials; 2: it may report */
static int strict_entered, strict_may_exit;

static void die(const char *what)
{
	perror(what);
	exit(2);
}

/* Prints the lines of PATH that start with one of KEYS (NULL-terminated). */
static void print_lines(const char *who, const char *path, const char *const *keys)
{
	FILE *f = fopen(path, "r");
	if (!f)
		die(path);
	char line[256];
	while (fgets(line, sizeof line, f))
		for (const char *const *key = keys; *key; key++)
			if (!strncmp(line, *key, strlen(*key)))
				printf("%s: %s", who, line);
	fclose(f);
}

static void report(const char *who)
{
	unsigned r, e, s, gr, ge, gs;
	if (syscall(SYS_getresuid, &r, &e, &s) || syscall(SYS_getresgid, &gr, &ge, &gs))
		die("getres[ug]id");
	/* An invalid id changes nothing and returns the current one. */
	unsigned fsuid = syscall(SYS_setfsuid, -1), fsgid = syscall(SYS_setfsgid, -1);
	printf("%s: uid %u %u %u %u gid %u %u %u %u groups", who, r, e, s, fsuid, gr, ge, gs, fsgid);
	gid_t groups[64];
	long n = syscall(SYS_getgroups, 64, groups);
	if (n < 0)
		die("getgroups");
	for (long i = 0; i < n; i++)
		printf(" %u", groups[i]);
	printf("\n");
	const char *const keys[] = { "Cap", "NoNewPrivs:", "Seccomp:", NULL };
	print_lines(who, "/proc/thread-self/status", keys);
}

static void set_stage(int to)
{
	pthread_mutex_lock(&lock);
	stage = to;
	pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
}

static void wait_stage(int at_least)
{
	pthread_mutex_lock(&lock);
	while (stage < at_least)
		pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
}

/*
 * The threads whose status says "Seccomp: 1". (By /proc/self/task: a restored process
 * lives in a pid namespace of its own, and /proc counts in the outer one.)
 */
static int count_strict(void)
{
	DIR *tasks = opendir("/proc/self/task");
	if (!tasks)
		die("/proc/self/task");
	int n = 0;
	struct dirent *e;
	while ((e = readdir(tasks))) {
		char path[300], line[256];
		snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
		FILE *f = e->d_name[0] == '.' ? NULL : fopen(path, "r");
		while (f && fgets(line, sizeof line, f))
			n += !strcmp(line, "Seccomp:\t1\n");
		if (f)
			fclose(f);
	}
	closedir(tasks);
	return n;
}

/* Only read, write, _exit and sigreturn in strict mode: no locks, raw exit. */
static void *strict(void *arg)
{
	(void)arg;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT))
		die("PR_SET_SECCOMP");
	__atomic_store_n(&strict_entered, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&strict_may_exit, __ATOMIC_SEQ_CST))
		__builtin_ia32_pause();
	syscall(SYS_exit, 0);
	return NULL;
}

static void *worker(void *arg)
{
	(void)arg;
	if (syscall(SYS_setresuid, -1, 1003, -1))
		die("setresuid in the worker");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		die("PR_SET_NO_NEW_PRIVS");
	set_stage(1);
	wait_stage(2);
	report("worker");
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	if (!strcmp(argv[1], "drop")) {
		gid_t groups[] = { 1002, 1004 };
		if (prctl(PR_CAPBSET_DROP, CAP_NET_RAW, 0, 0, 0))
			die("PR_CAPBSET_DROP");
		if (prctl(PR_SET_KEEPCAPS, 1) || setgroups(2, groups) || setresgid(1001, 1001, 1001) ||
		    setresuid(1003, 1001, 1001))
			die("dropping root");
		struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
		struct __user_cap_data_struct data[2] = { { 0 } };
		data[0].effective = data[0].permitted = data[0].inheritable = 1 << CAP_NET_BIND_SERVICE;
		if (syscall(SYS_capset, &header, data) ||
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_BIND_SERVICE, 0, 0))
			die("keeping CAP_NET_BIND_SERVICE");
		char *again[] = { argv[0], "run", argv[2], argv[3], NULL };
		execv("/proc/self/exe", again);
		die("execv");
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	int kept = open(argv[3], O_RDONLY);
	if (kept < 0)
		die(argv[3]);
	pthread_t t, s;
	if (pthread_create(&t, NULL, worker, NULL) || pthread_create(&s, NULL, strict, NULL))
		return 2;
	wait_stage(1);
	while (!__atomic_load_n(&strict_entered, __ATOMIC_SEQ_CST))
		sched_yield();
	/* The worker's change of user made the process undumpable. */
	if (prctl(PR_SET_DUMPABLE, 1))
		die("PR_SET_DUMPABLE");

	SetBreakpoint(1, 1, 1, 0, "phase=credentials");

	report("main");
	printf("threads in seccomp strict mode: %d\n", count_strict());
	__atomic_store_n(&strict_may_exit, 1, __ATOMIC_SEQ_CST);
	pthread_join(s, NULL);
	set_stage(2);
	pthread_join(t, NULL);
	printf("dumpable %d\n", prctl(PR_GET_DUMPABLE));
	char text[64] = "";
	if (pread(kept, text, sizeof text - 1, 0) < 0)
		die("reading the kept file");
	text[strcspn(text, "\n")] = 0;
	printf("kept: %s\n", text);
	int fd = open(argv[2], O_RDONLY);
	printf("secret: %s\n", fd >= 0 ? "opened" : errno == EACCES ? "EACCES" : strerror(errno));
	return 0;
}
