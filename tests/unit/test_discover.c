/* The discovery log walk (gateway/discover.c) with the test as the target:
 * chunking, short reads, a generation counter that moves, limits, and the
 * JSON printout of hostile strings. */
#include "gateway/discover.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/json.h"
#include "transports/nvme_spec.h"

#define HDR sizeof(struct nvmf_disc_log_hdr)
#define REC sizeof(struct nvmf_disc_log_entry)

static uint8_t logbuf[HDR + 8 * REC];

static void make_log(uint64_t genctr, uint64_t numrec)
{
	struct nvmf_disc_log_hdr *h = (void *)logbuf;

	memset(logbuf, 0, sizeof(logbuf));
	h->genctr = genctr;
	h->numrec = numrec;
	for (uint64_t i = 0; i < numrec && i < 8; i++) {
		struct nvmf_disc_log_entry *e = (void *)(logbuf + HDR + i * REC);
		e->trtype = NVMF_TRTYPE_TCP;
		e->adrfam = NVMF_ADRFAM_IPV4;
		e->subtype = NVMF_SUBTYPE_NVME;
		e->portid = (uint16_t)i;
		snprintf(e->trsvcid, sizeof(e->trsvcid), "4420");
		snprintf(e->subnqn, sizeof(e->subnqn), "nqn.test:%u", (unsigned)i);
		snprintf(e->traddr, sizeof(e->traddr), "127.0.0.1");
	}
}

/* One read served from logbuf, maybe short; the step. */
static enum disc_step serve(struct disc_walk *d, uint32_t most, uint32_t *off_out,
			    uint32_t *n_out)
{
	uint32_t off, n;
	uint8_t *dst;

	disc_walk_next(d, &off, &n, &dst);
	ck_assert_uint_eq(n % 4, 0);
	ck_assert_uint_gt(n, 0);
	if (off_out)
		*off_out = off;
	if (n_out)
		*n_out = n;
	if (n > most)
		n = most;
	memcpy(dst, logbuf + off, n);
	return disc_walk_got(d, n);
}

START_TEST(whole_log_in_chunks)
{
	struct disc_walk d;
	unsigned reads = 0;
	enum disc_step st;

	make_log(7, 6);
	ck_assert_int_eq(disc_walk_init(&d), 0);
	while ((st = serve(&d, DISC_CHUNK, NULL, NULL)) == DISC_READ)
		reads++;
	ck_assert_int_eq(st, DISC_DONE);
	/* header, 6 KiB of records in 4 KiB chunks (2), header again */
	ck_assert_uint_eq(reads + 1, 4);
	ck_assert(!memcmp(d.buf, logbuf, HDR + 6 * REC));
	disc_walk_free(&d);
}
END_TEST

/* A short read of the second header: the rest is asked at its offset,
 * not the whole header again past the end of the buffer (found by
 * fuzz_discovery: heap-buffer-overflow). */
START_TEST(short_second_header)
{
	struct disc_walk d;
	uint32_t off, n;

	make_log(3, 1);
	ck_assert_int_eq(disc_walk_init(&d), 0);
	ck_assert_int_eq(serve(&d, DISC_CHUNK, NULL, NULL), DISC_READ); /* header */
	ck_assert_int_eq(serve(&d, DISC_CHUNK, NULL, NULL), DISC_READ); /* record */
	ck_assert_int_eq(serve(&d, 512, &off, &n), DISC_READ);
	ck_assert_uint_eq(off, 0);
	ck_assert_uint_eq(n, HDR);
	ck_assert_int_eq(serve(&d, DISC_CHUNK, &off, &n), DISC_DONE);
	ck_assert_uint_eq(off, 512);
	ck_assert_uint_eq(n, HDR - 512);
	disc_walk_free(&d);
}
END_TEST

START_TEST(changing_log_restarts_then_fails)
{
	struct disc_walk d;
	enum disc_step st = DISC_READ;
	unsigned walks = 0;

	ck_assert_int_eq(disc_walk_init(&d), 0);
	for (unsigned reads = 0; st == DISC_READ && reads < 1000; reads++) {
		uint32_t off, n;
		uint8_t *dst;
		disc_walk_next(&d, &off, &n, &dst);
		/* the counter moves before every second header */
		if (off == 0 && d.off > 0)
			make_log(100 + ++walks, 2);
		else if (d.off == 0)
			make_log(100 + walks, 2);
		memcpy(dst, logbuf + off, n);
		st = disc_walk_got(&d, n);
	}
	ck_assert_int_eq(st, DISC_ERR);
	ck_assert_ptr_nonnull(strstr(d.why, "kept changing"));
	ck_assert_uint_eq(walks, DISC_TRIES);
	disc_walk_free(&d);
}
END_TEST

START_TEST(limits)
{
	struct disc_walk d;

	make_log(1, DISC_MAX_RECORDS + 1);
	ck_assert_int_eq(disc_walk_init(&d), 0);
	ck_assert_int_eq(serve(&d, DISC_CHUNK, NULL, NULL), DISC_ERR);
	disc_walk_free(&d);
	make_log(1, 1);
	ck_assert_int_eq(disc_walk_init(&d), 0);
	ck_assert_int_eq(serve(&d, 0, NULL, NULL), DISC_ERR); /* no data: no endless loop */
	disc_walk_free(&d);
}
END_TEST

/* DISC_MAX_RECORDS records (4 MiB) are walked, one more is refused. */
START_TEST(walks_the_limit)
{
	struct nvmf_disc_log_hdr h = { .genctr = 5, .numrec = DISC_MAX_RECORDS };
	struct disc_walk d;
	enum disc_step st = DISC_READ;
	unsigned reads = 0;

	ck_assert_int_eq(disc_walk_init(&d), 0);
	while (st == DISC_READ) {
		uint32_t off, n;
		uint8_t *dst;
		disc_walk_next(&d, &off, &n, &dst);
		for (uint32_t k = 0; k < n; k++)
			dst[k] = off + k < HDR ? ((uint8_t *)&h)[off + k] : (uint8_t)(off + k);
		st = disc_walk_got(&d, n);
		reads++;
	}
	ck_assert_int_eq(st, DISC_DONE);
	ck_assert_uint_eq(reads, 1 + DISC_MAX_RECORDS * REC / DISC_CHUNK + 1);
	ck_assert_uint_eq(d.buf[HDR + 12345], (uint8_t)(HDR + 12345));
	disc_walk_free(&d);
}
END_TEST

START_TEST(json_escapes_target_strings)
{
	struct nvmf_disc_log_entry *e = (void *)(logbuf + HDR);
	struct json_val *v = NULL;
	char *text = NULL, err[128];
	size_t len = 0;

	make_log(9, 1);
	memcpy(e->subnqn, "nqn.\"evil\"\\\n\x01\xff", 15);
	memset(e->traddr, 'a', sizeof(e->traddr)); /* no NUL: the field's size bounds it */
	FILE *f = open_memstream(&text, &len);
	disc_print(f, logbuf, true);
	fclose(f);
	ck_assert_msg(json_parse(text, len, &v, err, sizeof(err)) == 0, "%s: %s", err, text);
	const struct json_val *r = &json_get(v, "records")->kids[0];
	ck_assert_str_eq(json_get_str(r, "subnqn"), "nqn.\"evil\"\\\n\x01\xc3\xbf");
	ck_assert_uint_eq(strlen(json_get_str(r, "traddr")), sizeof(e->traddr));
	json_val_free(v);
	free(text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("discover");
	TCase *tc = tcase_create("walk");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, whole_log_in_chunks);
	tcase_add_test(tc, short_second_header);
	tcase_add_test(tc, changing_log_restarts_then_fails);
	tcase_add_test(tc, limits);
	tcase_add_test(tc, walks_the_limit);
	tcase_add_test(tc, json_escapes_target_strings);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
