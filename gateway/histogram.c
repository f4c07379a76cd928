#include "gateway/histogram.h"

#include <string.h>

/* With shift = max(0, floor(log2 v) - S), v >> shift lands in [2^S, 2^(S+1))
 * for every v >= 2^S, so shift << S plus it numbers the buckets without gaps;
 * below 2^(S+1) shift is 0 and the index is v itself. */
static unsigned bucket_of(uint64_t v)
{
	unsigned e = 63 - (unsigned)__builtin_clzll(v | 1);
	unsigned shift = e > HIST_SUB_BITS ? e - HIST_SUB_BITS : 0;

	return (shift << HIST_SUB_BITS) + (unsigned)(v >> shift);
}

/* The middle halves the worst error against a sample in the bucket. */
static uint64_t bucket_mid(unsigned idx)
{
	unsigned shift = idx >> HIST_SUB_BITS;
	uint64_t lo;

	shift = shift ? shift - 1 : 0;
	lo = (uint64_t)(idx - (shift << HIST_SUB_BITS)) << shift;
	return lo + ((UINT64_C(1) << shift) >> 1);
}

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

void hist_record(struct hist *h, uint64_t ns)
{
	h->buckets[bucket_of(ns)]++;
	h->count++;
	if (ns < h->min)
		h->min = ns;
	if (ns > h->max)
		h->max = ns;
	h->sum_lo += ns;
	h->sum_hi += h->sum_lo < ns;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	uint64_t lo = dst->sum_lo + src->sum_lo;

	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
	dst->count += src->count;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	dst->sum_hi += src->sum_hi + (lo < src->sum_lo);
	dst->sum_lo = lo;
}

uint64_t hist_count(const struct hist *h) { return h->count; }
uint64_t hist_min(const struct hist *h) { return h->count ? h->min : 0; }
uint64_t hist_max(const struct hist *h) { return h->max; }

double hist_mean(const struct hist *h)
{
	if (!h->count)
		return 0.0;
	return ((double)h->sum_hi * 0x1p64 + (double)h->sum_lo) /
	       (double)h->count;
}

uint64_t hist_percentile(const struct hist *h, double pct)
{
	uint64_t rank, seen = 0;
	double r;

	if (!h->count)
		return 0;
	/* Written so that NaN counts as 0. */
	if (!(pct > 0))
		return h->min;
	if (pct >= 100)
		return h->max;
	r = pct / 100 * (double)h->count;
	rank = (uint64_t)r;
	if ((double)rank < r)
		rank++;
	/* Past 2^53 samples the double can round above the count. */
	if (rank > h->count)
		rank = h->count;
	for (unsigned i = bucket_of(h->min);; i++) {
		seen += h->buckets[i];
		if (seen >= rank) {
			uint64_t v = bucket_mid(i);

			return v < h->min ? h->min : v > h->max ? h->max : v;
		}
	}
}
