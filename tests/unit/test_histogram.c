#include "gateway/base/histogram.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* Fixed-seed xorshift, so a failure reproduces. */
static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Latency-like spread: every magnitude from 1 ns to ~2^40 ns. */
static uint64_t rng_log(void)
{
	unsigned bits = 1 + (unsigned)(rng() % 40);

	return rng() & ((UINT64_C(1) << bits) - 1);
}

/* The documented bound: within 1/256 of the true value. */
static void assert_close(uint64_t got, uint64_t want, const char *what)
{
	uint64_t d = got > want ? got - want : want - got;

	ck_assert_msg(d <= want / 256, "%s: got %llu want %llu", what,
		      (unsigned long long)got, (unsigned long long)want);
}

static struct hist *hist_new(void)
{
	struct hist *h = malloc(sizeof(*h));

	ck_assert_ptr_nonnull(h);
	hist_init(h);
	return h;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

START_TEST(empty)
{
	struct hist *h = hist_new();

	ck_assert_uint_eq(hist_count(h), 0);
	ck_assert_uint_eq(hist_min(h), 0);
	ck_assert_uint_eq(hist_max(h), 0);
	ck_assert(hist_mean(h) == 0.0);
	ck_assert_uint_eq(hist_percentile(h, 0), 0);
	ck_assert_uint_eq(hist_percentile(h, 50), 0);
	ck_assert_uint_eq(hist_percentile(h, 100), 0);
	free(h);
}
END_TEST

START_TEST(single_value)
{
	static const uint64_t vals[] = { 0, 1, 12345, UINT64_C(1) << 40 };

	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		struct hist *h = hist_new();

		hist_record(h, vals[i]);
		ck_assert_uint_eq(hist_count(h), 1);
		ck_assert_uint_eq(hist_min(h), vals[i]);
		ck_assert_uint_eq(hist_max(h), vals[i]);
		ck_assert(hist_mean(h) == (double)vals[i]);
		for (double p = 0; p <= 100; p += 12.5)
			ck_assert_uint_eq(hist_percentile(h, p), vals[i]);
		free(h);
	}
}
END_TEST

/* Below 2^(S+1) the buckets are one value wide. */
START_TEST(small_values_exact)
{
	struct hist *h = hist_new();

	for (uint64_t v = 0; v < 256; v++)
		hist_record(h, v);
	/* Half-rank steps keep rounding away from the rank boundaries. */
	for (uint64_t k = 1; k <= 256; k++)
		ck_assert_uint_eq(hist_percentile(h, (k - 0.5) * 100 / 256),
				  k - 1);
	ck_assert(hist_mean(h) == 127.5);
	free(h);
}
END_TEST

START_TEST(uniform_million)
{
	enum { N = 1000000 };
	struct hist *h = hist_new();

	for (uint64_t v = 1; v <= N; v++)
		hist_record(h, v);
	ck_assert_uint_eq(hist_count(h), N);
	ck_assert(hist_mean(h) == (N + 1) / 2.0);
	for (int tenths = 1; tenths < 1000; tenths++) {
		double p = tenths / 10.0, exact = p * N / 100;
		/* Nearest rank over 1..N is the rank itself. */
		uint64_t want = (uint64_t)exact + ((uint64_t)exact < exact);
		uint64_t got = hist_percentile(h, p);
		uint64_t d = got > want ? got - want : want - got;

		ck_assert_msg(d * 100 <= want, "p%.1f: got %llu want %llu", p,
			      (unsigned long long)got, (unsigned long long)want);
		assert_close(got, want, "uniform");
	}
	assert_close(hist_percentile(h, 99.99), 999900, "p99.99");
	assert_close(hist_percentile(h, 99.999), 999990, "p99.999");
	free(h);
}
END_TEST

START_TEST(random_vs_sorted)
{
	enum { N = 100000 };
	uint64_t *vals = malloc(N * sizeof(*vals));
	struct hist *h = hist_new();

	ck_assert_ptr_nonnull(vals);
	rng_state = 0x9E3779B97F4A7C15u;
	for (size_t i = 0; i < N; i++) {
		vals[i] = rng_log();
		hist_record(h, vals[i]);
	}
	qsort(vals, N, sizeof(*vals), cmp_u64);
	ck_assert_uint_eq(hist_min(h), vals[0]);
	ck_assert_uint_eq(hist_max(h), vals[N - 1]);
	for (int k = 1; k <= 1000; k++) {
		/* Half a rank short, so rounding cannot cross a rank. */
		size_t rank = (size_t)k * 100;
		double p = (rank - 0.5) * 100 / N;

		assert_close(hist_percentile(h, p), vals[rank - 1], "random");
	}
	free(vals);
	free(h);
}
END_TEST

START_TEST(merge_equals_both)
{
	struct hist *a = hist_new(), *b = hist_new(), *all = hist_new();
	struct hist *empty = hist_new();

	rng_state = 0xD1B54A32D192ED03u;
	for (int i = 0; i < 50000; i++) {
		uint64_t v = rng_log();

		hist_record(i % 3 ? a : b, v);
		hist_record(all, v);
	}
	/* Two sums past 2^63 make the merge carry into the high word. */
	hist_record(a, UINT64_C(1) << 63);
	hist_record(b, UINT64_C(1) << 63);
	hist_record(all, UINT64_C(1) << 63);
	hist_record(all, UINT64_C(1) << 63);
	hist_merge(a, b);
	ck_assert(memcmp(a, all, sizeof(*a)) == 0);
	hist_merge(a, empty);
	ck_assert(memcmp(a, all, sizeof(*a)) == 0);
	hist_merge(empty, all);
	ck_assert(memcmp(empty, all, sizeof(*a)) == 0);
	free(a);
	free(b);
	free(all);
	free(empty);
}
END_TEST

/* Each value is bracketed by 0 and UINT64_MAX so that the min/max clamp
 * cannot hide a wrong bucket. */
static void check_bucket_of(uint64_t v)
{
	struct hist *h = hist_new();

	hist_record(h, 0);
	hist_record(h, v);
	hist_record(h, UINT64_MAX);
	assert_close(hist_percentile(h, 50), v, "bucket");
	free(h);
}

START_TEST(huge_values)
{
	struct hist *h = hist_new();

	for (unsigned k = 0; k < 64; k++) {
		uint64_t p2 = UINT64_C(1) << k;

		check_bucket_of(p2);
		check_bucket_of(p2 - 1);
		check_bucket_of(p2 + 1);
		check_bucket_of(p2 + p2 / 2);
	}
	check_bucket_of(UINT64_MAX - 1);
	rng_state = 0x94D049BB133111EBu;
	for (int i = 0; i < 2000; i++)
		check_bucket_of(rng() >> (rng() % 64));

	hist_record(h, UINT64_MAX);
	hist_record(h, UINT64_MAX);
	hist_record(h, UINT64_C(1) << 40);
	ck_assert_uint_eq(hist_count(h), 3);
	ck_assert_uint_eq(hist_min(h), UINT64_C(1) << 40);
	ck_assert_uint_eq(hist_max(h), UINT64_MAX);
	ck_assert(hist_mean(h) ==
		  (2 * (double)UINT64_MAX + 0x1p40) / 3);
	assert_close(hist_percentile(h, 50), UINT64_MAX, "2^64-1");
	assert_close(hist_percentile(h, 33), UINT64_C(1) << 40, "2^40");
	free(h);
}
END_TEST

START_TEST(ends_are_min_max)
{
	struct hist *h = hist_new();

	rng_state = 0xBF58476D1CE4E5B9u;
	for (int i = 0; i < 10000; i++)
		hist_record(h, 1000 + rng_log());
	ck_assert_uint_eq(hist_percentile(h, 0), hist_min(h));
	ck_assert_uint_eq(hist_percentile(h, 100), hist_max(h));
	ck_assert_uint_eq(hist_percentile(h, -5), hist_min(h));
	ck_assert_uint_eq(hist_percentile(h, 250), hist_max(h));
	free(h);
}
END_TEST

/* The per-reactor form: recorded into a zeroed (calloc'd) histogram with
 * relaxed stores and merged by a reader, it gives what hist_record and
 * hist_merge give. */
START_TEST(relaxed_matches_plain)
{
	struct hist *plain = malloc(sizeof(*plain)), *shared = calloc(1, sizeof(*shared));
	struct hist *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	uint64_t x = 88172645463325252ull;

	hist_init(plain);
	hist_init(a);
	hist_init(b);
	for (int i = 0; i < 100000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t v = 1000 + x % 5000000;
		hist_record(plain, v);
		hist_record_relaxed(shared, v);
	}
	hist_merge(a, plain);
	hist_merge_relaxed(b, shared);
	hist_merge_relaxed(b, &(struct hist){ 0 }); /* an empty one changes nothing */
	ck_assert_uint_eq(hist_count(b), hist_count(a));
	ck_assert_uint_le(hist_min(b), hist_min(a));
	ck_assert_uint_ge(hist_max(b), hist_max(a));
	for (double p = 1; p < 100; p += 7.5)
		ck_assert_uint_eq(hist_percentile(b, p), hist_percentile(a, p));
	ck_assert(hist_sum(b) == hist_sum(a));
	/* Cumulative counts: monotonic, all at the top, none below min. */
	ck_assert_uint_eq(hist_count_le(b, 999), 0);
	ck_assert_uint_eq(hist_count_le(b, UINT64_MAX), 100000);
	ck_assert_uint_le(hist_count_le(b, 1000000), hist_count_le(b, 2000000));
	free(plain);
	free(shared);
	free(a);
	free(b);
}
END_TEST

START_TEST(percentiles_monotonic)
{
	struct hist *h = hist_new();
	uint64_t prev = 0;

	rng_state = 0x2545F4914F6CDD1Du;
	for (int i = 0; i < 20000; i++)
		hist_record(h, rng_log());
	for (int k = 0; k <= 10000; k++) {
		uint64_t v = hist_percentile(h, k / 100.0);

		ck_assert_msg(v >= prev, "p%.2f: %llu < %llu", k / 100.0,
			      (unsigned long long)v, (unsigned long long)prev);
		ck_assert(v >= hist_min(h) && v <= hist_max(h));
		prev = v;
	}
	free(h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("histogram");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, empty);
	tcase_add_test(tc, single_value);
	tcase_add_test(tc, small_values_exact);
	tcase_add_test(tc, uniform_million);
	tcase_add_test(tc, random_vs_sorted);
	tcase_add_test(tc, merge_equals_both);
	tcase_add_test(tc, huge_values);
	tcase_add_test(tc, ends_are_min_max);
	tcase_add_test(tc, percentiles_monotonic);
	tcase_add_test(tc, relaxed_matches_plain);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
