#include "transports/crc32c.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint32_t (*update_t)(uint32_t, const void *, size_t);

/* Fixed-seed xorshift, so a failure reproduces. */
static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void fill_random(unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)rng();
}

/* Bit at a time, straight from the definition: the oracle that neither
 * table trick nor instruction shares code with. */
static uint32_t crc_bitwise(const unsigned char *p, size_t n)
{
	uint32_t c = ~0u;

	while (n--) {
		c ^= *p++;
		for (int i = 0; i < 8; i++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
	}
	return ~c;
}

static uint32_t one_shot(update_t fn, const void *buf, size_t len)
{
	return crc32c_final(fn(crc32c_init(), buf, len));
}

static bool hw_or_skip(void)
{
	if (!crc32c_have_hw())
		fprintf(stderr, "SKIP: no SSE4.2 on this CPU\n");
	return crc32c_have_hw();
}

static void check_vectors(update_t fn)
{
	unsigned char buf[32];

	memset(buf, 0x00, sizeof(buf));
	ck_assert_uint_eq(one_shot(fn, buf, sizeof(buf)), 0x8A9136AAu);
	memset(buf, 0xFF, sizeof(buf));
	ck_assert_uint_eq(one_shot(fn, buf, sizeof(buf)), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)i;
	ck_assert_uint_eq(one_shot(fn, buf, sizeof(buf)), 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)(31 - i);
	ck_assert_uint_eq(one_shot(fn, buf, sizeof(buf)), 0x113FDB5Cu);
	ck_assert_uint_eq(one_shot(fn, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(one_shot(fn, NULL, 0), 0);
}

START_TEST(vectors_sw) { check_vectors(crc32c_update_sw); }
END_TEST

START_TEST(vectors_hw)
{
	if (hw_or_skip())
		check_vectors(crc32c_update_hw);
}
END_TEST

START_TEST(vectors_dispatch)
{
	check_vectors(crc32c_update);
	ck_assert_uint_eq(crc32c("123456789", 9), 0xE3069283u);
}
END_TEST

START_TEST(init_final)
{
	ck_assert_uint_eq(crc32c_init(), 0xFFFFFFFFu);
	ck_assert_uint_eq(crc32c_final(0x12345678u), 0xEDCBA987u);
}
END_TEST

/* Lengths up to 200 KiB reach the hardware path's long and short 3-way
 * blocks, and their joins, from every remainder. */
enum { BIG = 200 * 1024 };

static void check_against_bitwise(update_t fn)
{
	unsigned char *buf = malloc(BIG);
	static const size_t lens[] = {
		767, 768, 769, 1535, 1536, 1537, 4096, 24575, 24576, 24577,
		24576 + 768, 49152, 49159, BIG,
	};

	ck_assert_ptr_nonnull(buf);
	rng_state = 0x9E3779B97F4A7C15u;
	fill_random(buf, BIG);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t off = 0; off < 8; off++) {
			size_t n = lens[i] - off;

			ck_assert_msg(one_shot(fn, buf + off, n) ==
					      crc_bitwise(buf + off, n),
				      "len %zu off %zu", n, off);
		}
	free(buf);
}

START_TEST(sw_matches_bitwise) { check_against_bitwise(crc32c_update_sw); }
END_TEST

START_TEST(hw_matches_bitwise)
{
	if (hw_or_skip())
		check_against_bitwise(crc32c_update_hw);
}
END_TEST

START_TEST(sw_hw_agree_small)
{
	unsigned char buf[300 + 16];

	if (!hw_or_skip())
		return;
	rng_state = 0xD1B54A32D192ED03u;
	for (int round = 0; round < 4; round++) {
		fill_random(buf, sizeof(buf));
		for (size_t off = 0; off < 16; off++)
			for (size_t n = 0; n <= 300; n++) {
				uint32_t seed = (uint32_t)rng();

				ck_assert_msg(crc32c_update_sw(seed, buf + off, n) ==
						      crc32c_update_hw(seed, buf + off, n),
					      "len %zu off %zu", n, off);
			}
	}
}
END_TEST

START_TEST(sw_hw_agree_large)
{
	unsigned char *buf = malloc(BIG);

	ck_assert_ptr_nonnull(buf);
	if (hw_or_skip()) {
		rng_state = 0x94D049BB133111EBu;
		fill_random(buf, BIG);
		for (int i = 0; i < 2000; i++) {
			size_t off = rng() % 64;
			size_t n = rng() % (BIG - off + 1);
			uint32_t seed = (uint32_t)rng();

			ck_assert_msg(crc32c_update_sw(seed, buf + off, n) ==
					      crc32c_update_hw(seed, buf + off, n),
				      "len %zu off %zu", n, off);
		}
	}
	free(buf);
}
END_TEST

/* The data digest runs over a PDU's iovecs one by one. */
static void check_chained(update_t fn)
{
	unsigned char *buf = malloc(BIG);

	ck_assert_ptr_nonnull(buf);
	rng_state = 0xBF58476D1CE4E5B9u;
	fill_random(buf, BIG);
	for (int round = 0; round < 300; round++) {
		size_t total = rng() % (round < 200 ? 5000 : BIG + 1);
		uint32_t want = one_shot(fn, buf, total);
		uint32_t crc = crc32c_init();
		size_t done = 0;

		while (done < total) {
			size_t left = total - done;
			/* Mostly short pieces, some empty, now and then long. */
			size_t piece = rng() % 4 == 0 ? rng() % (left + 1)
						      : rng() % 33;

			if (piece > left)
				piece = left;
			crc = fn(crc, buf + done, piece);
			done += piece;
		}
		ck_assert_msg(crc32c_final(crc) == want, "total %zu", total);
	}
	free(buf);
}

START_TEST(chained_sw) { check_chained(crc32c_update_sw); }
END_TEST

START_TEST(chained_hw)
{
	if (hw_or_skip())
		check_chained(crc32c_update_hw);
}
END_TEST

START_TEST(chained_dispatch) { check_chained(crc32c_update); }
END_TEST

int main(void)
{
	Suite *s = suite_create("crc32c");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, vectors_sw);
	tcase_add_test(tc, vectors_hw);
	tcase_add_test(tc, vectors_dispatch);
	tcase_add_test(tc, init_final);
	tcase_add_test(tc, sw_matches_bitwise);
	tcase_add_test(tc, hw_matches_bitwise);
	tcase_add_test(tc, sw_hw_agree_small);
	tcase_add_test(tc, sw_hw_agree_large);
	tcase_add_test(tc, chained_sw);
	tcase_add_test(tc, chained_hw);
	tcase_add_test(tc, chained_dispatch);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
