/*
 * No SetBreakpoint, and C++: for `sdt run --break` with the names a C++ source uses.
 * One thread calls Klass::method(long) for n = 0..999 (so its third call has x = 2);
 * another calls the overloads Klass::scale(int) and Klass::scale(double). Prints the
 * totals, which must not change under sdt.
 */
#include <cstdio>
#include <thread>

struct Klass {
    long total = 0;
    long method(long x);
    long scale(int x);
    long scale(double x);
};

__attribute__((noinline)) long Klass::method(long x) {
    total += x;
    return total;
}

__attribute__((noinline)) long Klass::scale(int x) {
    total += 2 * x;
    return total;
}

__attribute__((noinline)) long Klass::scale(double x) {
    total += (long)(x * 4);
    return total;
}

int main() {
    Klass counted, scaled;
    std::thread worker([&counted] {
        for (long n = 0; n < 1000; n++)
            counted.method(n);
    });
    std::thread other([&scaled] {
        for (int n = 0; n < 100; n++) {
            scaled.scale(n);
            scaled.scale(n * 0.5);
        }
    });
    worker.join();
    other.join();
    std::printf("totals %ld %ld\n", counted.total, scaled.total);
    return 0;
}
