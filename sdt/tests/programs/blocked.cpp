// Threads blocked every way `sdt show` tells apart, then a breakpoint (main's, once all
// of them wait) and a hang, which `sdt run --timeout` ends:
//  - two threads each holding the std::mutex of one account and waiting for the other's
//    (a deadlock), main joining the first of them;
//  - a thread waiting on a std::condition_variable nobody signals;
//  - a thread holding a priority-inheriting mutex and locking a normal one it already
//    holds (a deadlock of one), and a thread waiting for the priority-inheriting one;
//  - a thread reading a pipe nobody writes to, and one waiting for a child process
//    (which ends when the program does: it reads that pipe too);
//  - a thread waiting for the mutex `plugin_lock` of library LIB (tests/programs/loaded.c),
//    which main holds.
// Prints "blocked" once every thread waits.
//   usage: blocked LIB
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sdt.h"

struct Account {
	long balance;
	std::mutex m;
};

Account accounts[4];
std::mutex alone;
std::condition_variable never;
pthread_mutex_t inherited, twice = PTHREAD_MUTEX_INITIALIZER;
pthread_barrier_t both_hold;
sem_t holds_inherited;

static void transfer(int from, int to)
{
	std::lock_guard<std::mutex> a(accounts[from].m);
	pthread_barrier_wait(&both_hold);
	std::lock_guard<std::mutex> b(accounts[to].m);
	accounts[to].balance += 1;
}

// The system call thread `tid` sleeps in and its first argument, as /proc says.
static bool in_call(pid_t tid, int nr, unsigned long arg)
{
	char path[64], line[128] = "";
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	int at = -1;
	unsigned long first = 0;
	bool read = fgets(line, sizeof line, f) && sscanf(line, "%d %lx", &at, &first) == 2;
	fclose(f);
	return read && at == nr && first == arg;
}

// Whether thread `tid` sleeps in futex on a word of `object`.
template <typename T> static bool waits_on(pid_t tid, const T &object)
{
	for (size_t at = 0; at < sizeof object; at += 4)
		if (in_call(tid, SYS_futex, (unsigned long)&object + at))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	void *lib = argc > 1 ? dlopen(argv[1], RTLD_NOW) : nullptr;
	auto *plugin = lib ? (pthread_mutex_t *)dlsym(lib, "plugin_lock") : nullptr;
	if (!plugin) {
		fprintf(stderr, "usage: blocked LIB (a library with plugin_lock): %s\n", dlerror());
		return 2;
	}
	pthread_mutex_lock(plugin);
	pthread_mutexattr_t pi;
	pthread_mutexattr_init(&pi);
	pthread_mutexattr_setprotocol(&pi, PTHREAD_PRIO_INHERIT);
	pthread_mutex_init(&inherited, &pi);
	pthread_barrier_init(&both_hold, nullptr, 2);
	sem_init(&holds_inherited, 0, 0);
	int quiet[2];
	if (pipe(quiet) != 0)
		return 1;
	pid_t child = fork();
	if (child == 0) {
		close(quiet[1]);
		char byte;
		_exit(read(quiet[0], &byte, 1) == 0 ? 0 : 1);
	}
	pid_t tids[8];
	sem_t started;
	sem_init(&started, 0, 0);
	auto thread = [&](int i, auto body) {
		return std::thread([&, i, body] {
			tids[i] = gettid();
			sem_post(&started);
			body();
		});
	};
	std::thread t0 = thread(0, [] { transfer(1, 2); });
	std::thread t1 = thread(1, [] { transfer(2, 1); });
	std::thread t2 = thread(2, [] {
		std::unique_lock<std::mutex> lock(alone);
		never.wait(lock, [] { return false; });
	});
	std::thread t3 = thread(3, [] {
		pthread_mutex_lock(&inherited);
		sem_post(&holds_inherited);
		pthread_mutex_lock(&twice);
		pthread_mutex_lock(&twice);
	});
	std::thread t4 = thread(4, [] {
		sem_wait(&holds_inherited);
		pthread_mutex_lock(&inherited);
	});
	std::thread t5 = thread(5, [&] {
		char byte;
		if (read(quiet[0], &byte, 1) < 0)
			perror("read");
	});
	std::thread t6 = thread(6, [&] { waitpid(child, nullptr, 0); });
	std::thread t7 = thread(7, [&] { pthread_mutex_lock(plugin); });
	for (int i = 0; i < 8; i++)
		sem_wait(&started);
	while (!waits_on(tids[0], accounts[2].m) || !waits_on(tids[1], accounts[1].m) ||
	       !waits_on(tids[2], never) || !waits_on(tids[3], twice) || !waits_on(tids[4], inherited) ||
	       !in_call(tids[5], SYS_read, quiet[0]) || !in_call(tids[6], SYS_wait4, child) ||
	       !waits_on(tids[7], *plugin))
		usleep(1000);
	puts("blocked");
	fflush(stdout);
	SetBreakpoint(1, 1, 1, 0, "blocked");
	t0.join();
	return 0;
}
