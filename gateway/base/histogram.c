#include "gateway/base/histogram.h"

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

/* The first and last value of a bucket. */
static uint64_t bucket_lo(unsigned idx)
{
	unsigned shift = idx >> HIST_SUB_BITS;

	shift = shift ? shift - 1 : 0;
	return (uint64_t)(idx - (shift << HIST_SUB_BITS)) << shift;
}

static uint64_t bucket_hi(unsigned idx)
{
	unsigned shift = idx >> HIST_SUB_BITS;

	shift = shift ? shift - 1 : 0;
	return bucket_lo(idx) + ((UINT64_C(1) << shift) - 1);
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

#define LD(p) __atomic_load_n(p, __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n(p, v, __ATOMIC_RELAXED)

void hist_record_relaxed(struct hist *h, uint64_t ns)
{
	uint64_t *b = &h->buckets[bucket_of(ns)];
	uint64_t lo = h->sum_lo + ns;

	ST(b, *b + 1);
	if (!h->count || ns < h->min)
		ST(&h->min, ns);
	if (ns > h->max)
		ST(&h->max, ns);
	ST(&h->count, h->count + 1);
	ST(&h->sum_hi, h->sum_hi + (lo < ns));
	ST(&h->sum_lo, lo);
}

void hist_merge_relaxed(struct hist *dst, const struct hist *src)
{
	uint64_t n = 0, first = UINT64_MAX, last = 0, lo, hi;

	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		uint64_t c = LD(&src->buckets[i]);

		if (!c)
			continue;
		dst->buckets[i] += c;
		n += c;
		if (first == UINT64_MAX)
			first = bucket_lo(i);
		last = bucket_hi(i);
	}
	if (!n)
		return;
	/* The writer's min/max may belong to samples whose buckets we did
	 * not see yet (or the other way round): widen to both. */
	lo = LD(&src->min);
	hi = LD(&src->max);
	if (first < lo)
		lo = first;
	if (last > hi)
		hi = last;
	if (lo < dst->min)
		dst->min = lo;
	if (hi > dst->max)
		dst->max = hi;
	dst->count += n;
	lo = dst->sum_lo + LD(&src->sum_lo);
	dst->sum_hi += LD(&src->sum_hi) + (lo < dst->sum_lo);
	dst->sum_lo = lo;
}

uint64_t hist_count_le(const struct hist *h, uint64_t ns)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < HIST_BUCKETS && bucket_hi(i) <= ns; i++)
		n += h->buckets[i];
	return n;
}

double hist_sum(const struct hist *h)
{
	return (double)h->sum_hi * 0x1p64 + (double)h->sum_lo;
}
