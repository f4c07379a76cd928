/* The discovery log as the gateway acts on it (transports/discovery_log.c):
 * every peer field checked, old log vs new log -> actions, referrals that
 * loop or go too deep. */
#include "transports/discovery_log.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/nvme_spec.h"

#define HDR sizeof(struct nvmf_disc_log_hdr)
#define REC sizeof(struct nvmf_disc_log_entry)
#define MAXR 8

static uint8_t buf[HDR + MAXR * REC];

static struct nvmf_disc_log_entry *rec(unsigned i)
{
	return (void *)(buf + HDR + i * REC);
}

static void log_reset(uint64_t genctr)
{
	memset(buf, 0, sizeof(buf));
	((struct nvmf_disc_log_hdr *)buf)->genctr = genctr;
}

/* Appends a record; returns it for the test to spoil. */
static struct nvmf_disc_log_entry *add(uint8_t trtype, uint8_t subtype, const char *nqn,
				       const char *addr, const char *port)
{
	struct nvmf_disc_log_hdr *h = (void *)buf;
	struct nvmf_disc_log_entry *e = rec((unsigned)h->numrec++);

	e->trtype = trtype;
	e->adrfam = strchr(addr, ':') ? NVMF_ADRFAM_IPV6 : NVMF_ADRFAM_IPV4;
	e->subtype = subtype;
	memcpy(e->subnqn, nqn, strlen(nqn));
	memcpy(e->traddr, addr, strlen(addr));
	memcpy(e->trsvcid, port, strlen(port));
	return e;
}

static size_t buflen(void)
{
	return HDR + ((struct nvmf_disc_log_hdr *)buf)->numrec * REC;
}

static void parse_ok(struct dlog *l)
{
	const char *why = NULL;
	int rc = dlog_parse(l, buf, buflen(), &why);
	ck_assert_msg(rc == 0, "%d %s", rc, why ? why : "");
}

START_TEST(parses_good_records)
{
	struct dlog l;

	log_reset(7);
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.a", "127.0.0.1", "4420");
	add(NVMF_TRTYPE_RDMA, NVMF_SUBTYPE_NVME, "nqn.a", "fe80::1", "4420");
	struct nvmf_disc_log_entry *r =
		add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_DISCOVERY_CUR, NVME_DISC_SUBSYS_NQN, "10.0.0.1",
		    "8009");
	/* Space-padded address and port, as some targets send them. */
	memset(r->traddr, ' ', sizeof(r->traddr));
	memcpy(r->traddr, "10.0.0.1", 8);
	memset(r->trsvcid, ' ', sizeof(r->trsvcid));
	memcpy(r->trsvcid, "8009", 4);
	parse_ok(&l);
	ck_assert_uint_eq(l.genctr, 7);
	ck_assert_uint_eq(l.nr, 3);
	ck_assert_uint_eq(l.skipped, 0);
	ck_assert_str_eq(l.e[1].traddr, "fe80::1");
	ck_assert_uint_eq(l.e[1].trtype, NVMF_TRTYPE_RDMA);
	ck_assert_str_eq(l.e[2].traddr, "10.0.0.1");
	ck_assert_str_eq(l.e[2].trsvcid, "8009");
	dlog_free(&l);
}
END_TEST

START_TEST(header_must_match_length)
{
	struct dlog l;
	const char *why = NULL;
	struct nvmf_disc_log_hdr *h = (void *)buf;

	log_reset(1);
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.a", "127.0.0.1", "4420");
	ck_assert_int_eq(dlog_parse(&l, buf, HDR - 4, &why), -EPROTO);
	ck_assert_int_eq(dlog_parse(&l, buf, buflen() - 4, &why), -EPROTO);
	ck_assert_str_eq(why, "fewer bytes than its records");
	h->numrec = UINT64_MAX / REC + 2; /* numrec * 1024 wraps */
	ck_assert_int_eq(dlog_parse(&l, buf, sizeof(buf), &why), -EPROTO);
	h->numrec = 1;
	h->recfmt = 1;
	ck_assert_int_eq(dlog_parse(&l, buf, buflen(), &why), -EPROTO);
	h->recfmt = 0;
	h->numrec = 0;
	parse_ok(&l);
	ck_assert_uint_eq(l.nr, 0);
	dlog_free(&l);
}
END_TEST

/* Each spoilt field skips its record and keeps the others. */
START_TEST(bad_fields_skip_the_record)
{
	struct dlog l;

	log_reset(1);
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.good", "127.0.0.1", "4420");
	add(NVMF_TRTYPE_FC, NVMF_SUBTYPE_NVME, "nqn.fc", "127.0.0.1", "4420");
	add(NVMF_TRTYPE_TCP, 9, "nqn.subtype", "127.0.0.1", "4420");
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.port", "127.0.0.1", "65536");
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.addr", "127.0.0.256", "4420");
	memset(add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "", "127.0.0.1", "4420")->subnqn, 'n',
	       NVMF_NQN_SIZE); /* no NUL in the field */
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.ctl\x01", "127.0.0.1", "4420");
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, NVME_DISC_SUBSYS_NQN, "127.0.0.1", "4420");
	parse_ok(&l);
	ck_assert_uint_eq(l.nr, 1);
	ck_assert_uint_eq(l.skipped, 7);
	ck_assert_str_eq(l.e[0].subnqn, "nqn.good");
	dlog_free(&l);

	/* The address family must match the address; IB is RDMA's only. */
	log_reset(1);
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.a", "127.0.0.1", "4420")->adrfam =
		NVMF_ADRFAM_IPV6;
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.a", "::1", "4420")->adrfam = NVMF_ADRFAM_IB;
	add(NVMF_TRTYPE_RDMA, NVMF_SUBTYPE_NVME, "nqn.a", "fe80::2", "4420")->adrfam =
		NVMF_ADRFAM_IB;
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.a", "127.0.0.1", "0");
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.a", "127.0.0.1", "44x0");
	parse_ok(&l);
	ck_assert_uint_eq(l.nr, 1);
	ck_assert_uint_eq(l.e[0].adrfam, NVMF_ADRFAM_IB);
	dlog_free(&l);
}
END_TEST

START_TEST(repeats_kept_once)
{
	struct dlog l;

	log_reset(1);
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.a", "127.0.0.1", "4420");
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.a", "127.0.0.1", "4420")->portid = 3;
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.a", "127.0.0.1", "4421");
	parse_ok(&l);
	ck_assert_uint_eq(l.nr, 2);
	ck_assert_uint_eq(l.dups, 1);
	dlog_free(&l);
}
END_TEST

static bool known_b(void *ctx, const char *nqn)
{
	(void)ctx;
	return !strcmp(nqn, "nqn.b");
}

static size_t diff(const struct dlog *o, const struct dlog *n, struct dlog_action *act)
{
	return dlog_diff(o, n, known_b, NULL, act);
}

START_TEST(diff_actions)
{
	struct dlog o, n;
	struct dlog_action act[2 * MAXR];
	size_t k;

	/* First log: a new subsystem on TCP and RDMA is one target with two
	 * paths; a known one gets a path; the current discovery entry and a
	 * referral. */
	log_reset(1);
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.a", "127.0.0.1", "4420");
	add(NVMF_TRTYPE_RDMA, NVMF_SUBTYPE_NVME, "nqn.a", "10.0.0.1", "4420");
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.b", "127.0.0.1", "4420");
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_DISCOVERY_CUR, NVME_DISC_SUBSYS_NQN, "127.0.0.1", "8009");
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_DISCOVERY_REF, NVME_DISC_SUBSYS_NQN, "127.0.0.2", "8009");
	parse_ok(&o);
	k = diff(NULL, &o, act);
	ck_assert_uint_eq(k, 4);
	ck_assert_int_eq(act[0].kind, DLOG_NEW_TARGET);
	ck_assert_str_eq(act[0].e->subnqn, "nqn.a");
	ck_assert_int_eq(act[1].kind, DLOG_ADD_PATH);
	ck_assert_str_eq(act[1].e->traddr, "10.0.0.1");
	ck_assert_int_eq(act[2].kind, DLOG_ADD_PATH);
	ck_assert_str_eq(act[2].e->subnqn, "nqn.b");
	ck_assert_int_eq(act[3].kind, DLOG_REFERRAL);

	/* The same log again (a new generation, nothing else): no action. */
	((struct nvmf_disc_log_hdr *)buf)->genctr = 2;
	parse_ok(&n);
	ck_assert_uint_eq(diff(&o, &n, act), 0);
	dlog_free(&n);

	/* Second log: nqn.a's RDMA port and the referral went, nqn.a got a
	 * third port (known from the old log though known() says no), nqn.c
	 * is new. */
	log_reset(3);
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.c", "::1", "4420");
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.a", "127.0.0.1", "4420");
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.a", "127.0.0.1", "4421");
	add(NVMF_TRTYPE_TCP, NVMF_SUBTYPE_NVME, "nqn.b", "127.0.0.1", "4420");
	parse_ok(&n);
	k = diff(&o, &n, act);
	ck_assert_uint_eq(k, 4);
	ck_assert_int_eq(act[0].kind, DLOG_NEW_TARGET);
	ck_assert_str_eq(act[0].e->subnqn, "nqn.c");
	ck_assert_int_eq(act[1].kind, DLOG_ADD_PATH);
	ck_assert_str_eq(act[1].e->trsvcid, "4421");
	ck_assert_int_eq(act[2].kind, DLOG_GONE);
	ck_assert_str_eq(act[2].e->traddr, "10.0.0.1");
	ck_assert_int_eq(act[3].kind, DLOG_REFERRAL_GONE);

	/* Everything gone. */
	log_reset(4);
	struct dlog empty;
	parse_ok(&empty);
	k = diff(&n, &empty, act);
	ck_assert_uint_eq(k, 4);
	for (size_t i = 0; i < k; i++)
		ck_assert_int_eq(act[i].kind, DLOG_GONE);
	dlog_free(&empty);
	dlog_free(&n);
	dlog_free(&o);
}
END_TEST

static struct dlog_entry ref(const char *addr, const char *port)
{
	struct dlog_entry e = { .trtype = NVMF_TRTYPE_TCP,
				.adrfam = strchr(addr, ':') ? NVMF_ADRFAM_IPV6 : NVMF_ADRFAM_IPV4,
				.subtype = NVMF_SUBTYPE_DISCOVERY_REF };
	snprintf(e.traddr, sizeof(e.traddr), "%s", addr);
	snprintf(e.trsvcid, sizeof(e.trsvcid), "%s", port);
	snprintf(e.subnqn, sizeof(e.subnqn), "%s", NVME_DISC_SUBSYS_NQN);
	return e;
}

START_TEST(referral_loops_and_depth)
{
	struct dlog_refs r;
	struct dlog_entry e;

	ck_assert_int_eq(dlog_refs_init(&r, NVMF_TRTYPE_TCP, "nope", "8009"), -EINVAL);
	ck_assert_int_eq(dlog_refs_init(&r, NVMF_TRTYPE_TCP, "127.0.0.1", "8009"), 0);
	/* A controller that lists itself, in any spelling, is a loop. */
	e = ref("127.0.0.1", "8009");
	ck_assert_int_eq(dlog_refs_add(&r, 0, &e), DLOG_REF_LOOP);
	e = ref("::ffff:127.0.0.1", "8009");
	ck_assert_int_eq(dlog_refs_add(&r, 0, &e), DLOG_REF_LOOP);
	/* Another port, or transport, is another controller. */
	e = ref("127.0.0.1", "8010");
	ck_assert_int_eq(dlog_refs_add(&r, 0, &e), DLOG_REF_FOLLOW);
	e.trtype = NVMF_TRTYPE_RDMA;
	ck_assert_int_eq(dlog_refs_add(&r, 0, &e), DLOG_REF_FOLLOW);
	/* A referral back (A -> B -> A) ends. */
	e = ref("127.0.0.1", "8010");
	ck_assert_int_eq(dlog_refs_add(&r, 1, &e), DLOG_REF_LOOP);
	/* A chain of distinct controllers ends at the depth bound. */
	unsigned d = 1;
	char port[8];
	for (;; d++) {
		snprintf(port, sizeof(port), "%u", 9000 + d);
		e = ref("::1", port);
		enum dlog_ref_verdict v = dlog_refs_add(&r, d, &e);
		if (v != DLOG_REF_FOLLOW) {
			ck_assert_int_eq(v, DLOG_REF_TOO_DEEP);
			break;
		}
		ck_assert_uint_lt(d, 100);
	}
	ck_assert_uint_eq(d, DLOG_REFERRAL_DEPTH);
	/* Removed, a referral can come back; the configured one stays. */
	e = ref("127.0.0.1", "8010");
	dlog_refs_remove(&r, &e);
	ck_assert_int_eq(dlog_refs_add(&r, 0, &e), DLOG_REF_FOLLOW);
	e = ref("127.0.0.1", "8009");
	dlog_refs_remove(&r, &e);
	ck_assert_int_eq(dlog_refs_add(&r, 0, &e), DLOG_REF_LOOP);
	/* Not a referral. */
	e.subtype = NVMF_SUBTYPE_NVME;
	ck_assert_int_eq(dlog_refs_add(&r, 0, &e), DLOG_REF_BAD);
	/* The set is bounded. */
	for (unsigned i = 0; i < 2 * DLOG_MAX_CTRLS; i++) {
		snprintf(port, sizeof(port), "%u", 20000 + i);
		e = ref("10.1.1.1", port);
		enum dlog_ref_verdict v = dlog_refs_add(&r, 0, &e);
		ck_assert(v == DLOG_REF_FOLLOW || v == DLOG_REF_FULL);
	}
	ck_assert_uint_eq(r.nr, DLOG_MAX_CTRLS);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("discovery_log");
	TCase *tc = tcase_create("log");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, parses_good_records);
	tcase_add_test(tc, header_must_match_length);
	tcase_add_test(tc, bad_fields_skip_the_record);
	tcase_add_test(tc, repeats_kept_once);
	tcase_add_test(tc, diff_actions);
	tcase_add_test(tc, referral_loops_and_depth);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
