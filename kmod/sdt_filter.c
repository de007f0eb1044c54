// SPDX-License-Identifier: GPL-2.0
/*
 * The capture filter in the kernel (see sdt_filter.h). Runs on the breaking thread inside
 * SDT_IOC_TRIGGER: it must not allocate, sleep or take locks.
 *
 * The meaning is sdt-abi's (sdt-abi/src/filter.rs, glob.rs); the test
 * `kernel_filter_agrees_with_sdt_abi` builds this file as a host program and compares
 * the two on random filters and breakpoints.
 */
#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/string.h>
#else
#include <string.h>
#endif

#include "sdt_filter.h"

#define SDT_S64_MAX ((s64)(~0ULL >> 1))

static const struct sdt_rule *rules_of(const void *blob)
{
	return (const struct sdt_rule *)((const u8 *)blob + sizeof(struct sdt_filter));
}

static const u8 *strings_of(const void *blob)
{
	const struct sdt_filter *f = blob;

	return (const u8 *)(rules_of(blob) + f->nr_rules);
}

static bool in_strings(u32 off, u32 len, u32 strings_len)
{
	return off <= strings_len && len <= strings_len - off;
}

int sdt_filter_check(const void *blob, size_t len)
{
	const struct sdt_filter *f = blob;
	const u32 known = SDT_FILTER_MAX_LEVEL | SDT_FILTER_CLASSES | SDT_FILTER_IDS |
			  SDT_FILTER_HITS;
	const struct sdt_rule *r;
	u32 i;

	if (len < sizeof(*f))
		return -EINVAL;
	if ((f->flags & ~known) || f->nr_rules > SDT_FILTER_MAX_RULES ||
	    f->strings_len > SDT_FILTER_MAX_STRINGS)
		return -EINVAL;
	if (len != sizeof(*f) + (size_t)f->nr_rules * sizeof(*r) + f->strings_len)
		return -EINVAL;
	for (i = 0, r = rules_of(blob); i < f->nr_rules; i++, r++) {
		switch (r->kind) {
		case SDT_RULE_CLASS:
		case SDT_RULE_ID:
		case SDT_RULE_HIT:
			if (r->first > r->last)
				return -EINVAL;
			break;
		case SDT_RULE_ATTR:
			if (!in_strings(r->key_off, r->key_len, f->strings_len) ||
			    !in_strings(r->glob_off, r->glob_len, f->strings_len))
				return -EINVAL;
			break;
		case SDT_RULE_ALWAYS:
			break;
		default:
			return -EINVAL;
		}
	}
	return 0;
}

/* Rust's u8::is_ascii_whitespace: space, \t, \n, \f, \r (not \v). */
static bool is_space(u8 c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

static void trim(const u8 **s, size_t *len)
{
	while (*len && is_space((*s)[0])) {
		(*s)++;
		(*len)--;
	}
	while (*len && is_space((*s)[*len - 1]))
		(*len)--;
}

/*
 * The value of `key` in "key=value,key=value" (first match), spaces around keys and
 * values trimmed. Returns false if no pair has the key.
 */
static bool attr_value(const u8 *attrs, size_t len, const u8 *key, size_t key_len,
		       const u8 **value, size_t *value_len)
{
	size_t start = 0;

	while (start <= len) {
		size_t end = start, eq;
		const u8 *k;
		size_t klen;

		while (end < len && attrs[end] != ',')
			end++;
		for (eq = start; eq < end && attrs[eq] != '='; eq++)
			;
		if (eq < end) {
			k = attrs + start;
			klen = eq - start;
			trim(&k, &klen);
			if (klen == key_len && !memcmp(k, key, klen)) {
				*value = attrs + eq + 1;
				*value_len = end - eq - 1;
				trim(value, value_len);
				return true;
			}
		}
		start = end + 1;
	}
	return false;
}

/*
 * Matches `c` against the bracket expression at the start of `pat` ('[' first). Returns
 * the expression's length and sets *matched, or returns 0 if the '[' is not closed.
 */
static size_t match_class(const u8 *pat, size_t plen, u8 c, bool *matched)
{
	size_t i = 1;
	bool negate = false, hit = false, first = true;

	if (i < plen && (pat[i] == '!' || pat[i] == '^')) {
		negate = true;
		i++;
	}
	for (;;) {
		u8 lo;

		if (i >= plen)
			return 0;
		lo = pat[i];
		if (lo == ']' && !first) {
			*matched = hit != negate;
			return i + 1;
		}
		first = false;
		if (i + 2 < plen && pat[i + 1] == '-' && pat[i + 2] != ']') {
			hit |= lo <= c && c <= pat[i + 2];
			i += 3;
		} else {
			hit |= lo == c;
			i++;
		}
	}
}

bool sdt_glob_match(const u8 *pat, size_t plen, const u8 *text, size_t tlen)
{
	size_t p = 0, t = 0, star_p = 0, star_t = 0;
	bool star = false;

	while (t < tlen) {
		if (p < plen) {
			bool matched;
			size_t n;

			switch (pat[p]) {
			case '*':
				star = true;
				star_p = p;
				star_t = t;
				p++;
				continue;
			case '?':
				p++;
				t++;
				continue;
			case '[':
				n = match_class(pat + p, plen - p, text[t], &matched);
				if (n && matched) {
					p += n;
					t++;
					continue;
				}
				if (!n && text[t] == '[') {
					/* An unterminated '[' is a literal. */
					p++;
					t++;
					continue;
				}
				break;
			case '\\':
				if (p + 1 < plen) {
					if (pat[p + 1] == text[t]) {
						p += 2;
						t++;
						continue;
					}
					break;
				}
				fallthrough;
			default:
				if (pat[p] == text[t]) {
					p++;
					t++;
					continue;
				}
				break;
			}
		}
		/* Backtrack to the last '*', which now swallows one more byte. */
		if (!star)
			return false;
		p = star_p + 1;
		t = ++star_t;
	}
	while (p < plen && pat[p] == '*')
		p++;
	return p == plen;
}

static bool in_span(const struct sdt_rule *r, s64 v)
{
	return r->first <= v && v <= r->last;
}

bool sdt_filter_match(const void *blob, const struct sdt_site *site)
{
	const struct sdt_filter *f = blob;
	const struct sdt_rule *rules = rules_of(blob), *r;
	const u8 *strings = strings_of(blob);
	bool class_ok = !(f->flags & SDT_FILTER_CLASSES);
	bool id_ok = !(f->flags & SDT_FILTER_IDS);
	bool hit_ok = !(f->flags & SDT_FILTER_HITS) || site->hit == 0;
	s64 hit = site->hit > SDT_S64_MAX ? SDT_S64_MAX : (s64)site->hit;
	u32 i;

	for (i = 0, r = rules; i < f->nr_rules; i++, r++)
		if (r->kind == SDT_RULE_ALWAYS && r->level == site->level &&
		    r->class_ == site->class_ && r->id == site->id)
			return true;
	if ((f->flags & SDT_FILTER_MAX_LEVEL) && site->level > f->max_level)
		return false;
	for (i = 0, r = rules; i < f->nr_rules; i++, r++) {
		const u8 *value;
		size_t value_len;

		switch (r->kind) {
		case SDT_RULE_CLASS:
			class_ok |= in_span(r, site->class_);
			break;
		case SDT_RULE_ID:
			id_ok |= in_span(r, site->id);
			break;
		case SDT_RULE_HIT:
			hit_ok |= in_span(r, hit);
			break;
		case SDT_RULE_ATTR:
			if (!attr_value(site->attrs, site->attrs_len, strings + r->key_off,
					r->key_len, &value, &value_len))
				return false;
			if (!sdt_glob_match(strings + r->glob_off, r->glob_len, value, value_len))
				return false;
			break;
		}
	}
	return class_ok && id_ok && hit_ok;
}
