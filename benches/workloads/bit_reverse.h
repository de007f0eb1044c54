/* The bit-reversal permutation that starts an in-place iterative radix-2 FFT. */
#ifndef BIT_REVERSE_H
#define BIT_REVERSE_H

#include <complex.h>

/* Swaps a[i] and a[j] wherever j is i with its log2(len) bits reversed; len a power of 2. */
static inline void bit_reverse(double complex *a, long len)
{
	for (long i = 1, j = 0; i < len; i++) {
		long bit = len >> 1;
		for (; j & bit; bit >>= 1)
			j ^= bit;
		j |= bit;
		if (i < j) {
			double complex t = a[i];
			a[i] = a[j], a[j] = t;
		}
	}
}

#endif
