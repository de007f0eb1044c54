// C++ threads running lambdas that capture main's `total` by reference, each passing a
// breakpoint; then a function taking its bound by const reference breaks. gdb prints a
// reference as its address alone: `sdt history total` must give 7, `limit` 40. main's
// `workers`, which no lambda captures, is on the main thread's stack alone.
#include <cstdio>
#include <thread>
#include <vector>

#include <sdt.h>

static long below(const long &limit)
{
	SetBreakpoint(2, 1, 1, 1, "at=below");
	return limit - 1;
}

int main()
{
	long total = 7;
	int workers = 2;
	std::vector<std::thread> threads;
	for (int k = 0; k < workers; k++)
		threads.emplace_back([&total, k] {
			SetBreakpoint(1, 1, k, 1, "at=lambda");
			std::printf("thread %d sees %ld\n", k, total);
		});
	for (auto &t : threads)
		t.join();
	total = below(40);
	std::printf("total %ld\n", total);
	return 0;
}
