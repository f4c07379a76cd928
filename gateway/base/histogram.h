/* Log-linear latency histogram for nanosecond values, after HdrHistogram:
 * every power-of-two range [2^e, 2^(e+1)) is cut into 2^HIST_SUB_BITS equal
 * sub-buckets and values below 2^(HIST_SUB_BITS+1) are counted exactly, so
 * a bucket is never wider than 1/128 of the values in it and the whole
 * uint64_t range fits in a fixed array.  Recording is O(1) and allocates
 * nothing, so a struct hist can be embedded anywhere.
 *
 * Not thread-safe: give each thread its own and hist_merge() them for a
 * report. */
#ifndef GW_HISTOGRAM_H
#define GW_HISTOGRAM_H

#include <stdint.h>

#define HIST_SUB_BITS 7
/* Exact buckets 0..2^(S+1)-1, then 2^S per exponent S+1..63. */
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 1) << HIST_SUB_BITS)

struct hist {
	uint64_t count;
	uint64_t min, max;
	/* 128-bit sum, so the mean stays exact even for huge values. */
	uint64_t sum_lo, sum_hi;
	uint64_t buckets[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_record(struct hist *h, uint64_t ns);
void hist_merge(struct hist *dst, const struct hist *src);
uint64_t hist_count(const struct hist *h);

/* For a histogram written by one thread and read by others (per-reactor
 * statistics): the writer records with relaxed atomic stores (the same
 * instructions as hist_record on x86 and arm64), and a reader merges a
 * consistent-enough copy: its count is the sum of the buckets it read, and
 * min/max cover them, so percentiles of the result are always well formed.
 * The histogram may start zeroed (calloc) instead of hist_init. */
void hist_record_relaxed(struct hist *h, uint64_t ns);
void hist_merge_relaxed(struct hist *dst, const struct hist *src);
/* How many samples lie in buckets wholly at or below ns (a cumulative
 * "le" bucket of an exported histogram, exact to the bucket width). */
uint64_t hist_count_le(const struct hist *h, uint64_t ns);
/* The sum of the samples, as a double. */
double hist_sum(const struct hist *h);
/* The nearest-rank pct percentile (pct clamped to 0..100) to within 1/256
 * of its value: the middle of its bucket, kept inside [hist_min, hist_max].
 * pct 0 gives hist_min, 100 gives hist_max, an empty histogram 0. */
uint64_t hist_percentile(const struct hist *h, double pct);
/* 0 when empty. */
uint64_t hist_min(const struct hist *h);
uint64_t hist_max(const struct hist *h);
double hist_mean(const struct hist *h);

#endif
