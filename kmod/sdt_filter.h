/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The capture filter in the kernel: checks a breakpoint against the filter the daemon
 * registered (struct sdt_filter and its rules, include/uapi/linux/sdt_kmod.h), with the
 * meaning sdt-abi's Filter gives it.
 *
 * Pure code: no allocation, no locks, no kernel calls, so that the same file also builds
 * as a host program for the test that compares it with sdt-abi's Filter.
 */
#ifndef SDT_FILTER_H
#define SDT_FILTER_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
typedef uint8_t u8;
typedef int32_t s32;
typedef uint32_t u32;
typedef int64_t s64;
typedef uint64_t u64;
#ifndef EINVAL
#define EINVAL 22
#endif
#define fallthrough __attribute__((__fallthrough__))
#endif

#include "include/uapi/linux/sdt_kmod.h"

/* A breakpoint as the trigger reports it. */
struct sdt_site {
	s32 level;
	s32 class_;
	s32 id;
	u64 hit;		/* 0: not counted (passes any hit condition) */
	const u8 *attrs;
	size_t attrs_len;
};

/* 0 if `len` bytes at `blob` are a well-formed filter, else -EINVAL. */
int sdt_filter_check(const void *blob, size_t len);

/* Whether the site passes the filter (which sdt_filter_check accepted). */
bool sdt_filter_match(const void *blob, const struct sdt_site *site);

/* Shell glob over bytes: * ? [abc] [a-z] [!abc] [^abc] \x. */
bool sdt_glob_match(const u8 *pat, size_t plen, const u8 *text, size_t tlen);

#endif /* SDT_FILTER_H */
