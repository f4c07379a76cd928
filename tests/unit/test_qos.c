/* QoS in the volume layer, on the mem backend.  Every timing assertion is
 * a bound that a slow machine can only make easier: an I/O may never
 * complete before the time the buckets allow (measured from before its
 * submission), and the burst a full bucket allows is always granted at
 * once.  Order assertions rest on the reactor's own order (deferred
 * completions before timers), not on time. */
#include "gateway/volume/qos.h"
#include "gateway/volume/volume.h"
#include "unit_skip.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAXIO 64

struct rec {
	int n; /* completions so far */
	int order[MAXIO]; /* io index by completion */
	uint64_t when[MAXIO]; /* completion time, by io index */
	int err[MAXIO];
};

struct tio {
	struct vol_io io;
	int idx;
	struct rec *rec;
};

static char buf[1 << 20];

static void cb(struct vol_io *io, int err)
{
	struct tio *t = container_of(io, struct tio, io);

	t->rec->order[t->rec->n++] = t->idx;
	t->rec->when[t->idx] = reactor_now_ns();
	t->rec->err[t->idx] = err;
}

static void submit(struct volume *v, struct reactor *r, struct tio *t, int idx, struct rec *rec,
		   enum vol_op op, uint64_t len)
{
	static struct iovec iov = { buf, sizeof(buf) };

	memset(t, 0, sizeof(*t));
	t->idx = idx;
	t->rec = rec;
	t->io.op = op;
	t->io.offset = (uint64_t)idx * 4096 % (1 << 20);
	t->io.length = op == VOL_FLUSH ? 0 : len;
	t->io.iov = &iov;
	t->io.iovcnt = op == VOL_READ || op == VOL_WRITE ? 1 : 0;
	t->io.cb = cb;
	ck_assert_int_eq(vol_submit(v, r, &t->io), 0);
}

static void run_until(struct reactor **rs, unsigned nr, struct rec *rec, int n)
{
	uint64_t give_up = reactor_now_ns() + 60 * NSEC_PER_SEC;

	while (rec->n < n) {
		for (unsigned i = 0; i < nr; i++)
			reactor_poll(rs[i], 5 * NSEC_PER_MSEC);
		ck_assert_msg(reactor_now_ns() < give_up, "QoS never released the I/O");
	}
}

static struct volume *mem(unsigned nr)
{
	struct volume *v;

	ck_assert_int_eq(vol_mem_create("q", 2 << 20, 512, VOL_CAP_FLUSH | VOL_CAP_TRIM, nr, &v),
			 0);
	return v;
}

START_TEST(zero_is_unlimited)
{
	struct reactor r, *rs[] = { &r };
	struct volume *v = mem(1);
	struct vol_qos_limits l = { 0 };
	static struct tio t[MAXIO];
	struct rec rec = { 0 };
	struct vol_stats_snap *s = malloc(sizeof(*s));

	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	ck_assert_int_eq(vol_set_qos(v, &l), 0);
	for (int i = 0; i < MAXIO; i++)
		submit(v, &r, &t[i], i, &rec, i % 2 ? VOL_WRITE : VOL_READ, 4096);
	/* Nothing waits: every callback runs in the first pass. */
	reactor_poll(&r, 0);
	ck_assert_int_eq(rec.n, MAXIO);
	ck_assert_int_eq(vol_stats_snapshot(v, s), 0);
	ck_assert_uint_eq(s->qos_delayed, 0);
	ck_assert_uint_eq(s->reads, MAXIO / 2);
	ck_assert_uint_eq(s->writes, MAXIO / 2);
	ck_assert_uint_eq(s->in_flight, 0);
	(void)rs;
	free(s);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

/* Checks every completion against the earliest time a bucket of `rate`
 * per second, `depth` ns deep and full at t0 allows: the k-th unit of cost
 * (1-based, cumulative) is there at t0 - depth + k/rate. */
static void check_bound(const struct rec *rec, int n, uint64_t t0, const uint64_t *cum_cost,
			uint64_t rate, uint64_t depth)
{
	for (int i = 0; i < n; i++) {
		uint64_t earliest = t0 - depth + cum_cost[i] * NSEC_PER_SEC / rate;

		ck_assert_msg(rec->when[i] >= earliest,
			      "io %d done %lld ns before its tokens were there", i,
			      (long long)(earliest - rec->when[i]));
	}
}

START_TEST(iops_limit_burst_and_order)
{
	struct reactor r, *rs[] = { &r };
	struct volume *v = mem(1);
	struct vol_qos_limits l = { .iops = 50, .burst_ms = 100 }; /* 5 tokens */
	static struct tio t[30];
	struct rec rec = { 0 };
	uint64_t cum[30], t0;
	struct vol_stats_snap *s = malloc(sizeof(*s));
	int immediate;

	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	ck_assert_int_eq(vol_set_qos(v, &l), 0);
	t0 = reactor_now_ns();
	for (int i = 0; i < 30; i++) {
		submit(v, &r, &t[i], i, &rec, i % 3 ? VOL_READ : VOL_WRITE, 4096);
		cum[i] = (uint64_t)i + 1;
	}
	reactor_poll(&r, 0);
	immediate = rec.n;
	/* A full bucket lets its burst through at once. */
	ck_assert_int_ge(immediate, 5);
	run_until(rs, 1, &rec, 30);
	check_bound(&rec, 30, t0, cum, 50, 100 * NSEC_PER_MSEC);
	/* One queue per class, each in order. */
	for (int i = 1, lr = -1, lw = -1; i < 30; i++) {
		int idx = rec.order[i];
		int *last = idx % 3 ? &lr : &lw;
		ck_assert_int_gt(idx, *last);
		*last = idx;
	}
	ck_assert_int_eq(vol_stats_snapshot(v, s), 0);
	ck_assert_uint_eq(s->qos_delayed, (uint64_t)(30 - immediate));
	ck_assert_uint_eq(s->qos_queued, 0);
	ck_assert_uint_eq(s->in_flight, 0);
	ck_assert_uint_eq(s->reads + s->writes, 30);
	/* Latency includes the wait: the last one waited >= 400 ms. */
	ck_assert_uint_ge(hist_max(&s->read_lat) > hist_max(&s->write_lat)
				  ? hist_max(&s->read_lat) : hist_max(&s->write_lat),
			  400 * NSEC_PER_MSEC);
	free(s);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

START_TEST(bandwidth_limit_keeps_fifo)
{
	struct reactor r, *rs[] = { &r };
	struct volume *v = mem(1);
	/* 1 MiB/s, 100 ms deep: 104857 bytes of burst. */
	struct vol_qos_limits l = { .bandwidth = 1 << 20 };
	static struct tio t[13];
	struct rec rec = { 0 };
	uint64_t cum[12], sum = 0, t0;

	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	ck_assert_int_eq(vol_set_qos(v, &l), 0);
	t0 = reactor_now_ns();
	for (int i = 0; i < 12; i++) {
		/* A big one, then small ones that have tokens but must wait. */
		uint64_t len = i == 2 ? 256 << 10 : 4096;
		submit(v, &r, &t[i], i, &rec, VOL_WRITE, len);
		sum += len;
		cum[i] = sum;
	}
	/* A flush costs nothing but keeps its place behind the writes. */
	submit(v, &r, &t[12], 12, &rec, VOL_FLUSH, 0);
	run_until(rs, 1, &rec, 13);
	check_bound(&rec, 12, t0, cum, 1 << 20, 100 * NSEC_PER_MSEC);
	for (int i = 0; i < 13; i++)
		ck_assert_int_eq(rec.order[i], i);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

START_TEST(both_limits_the_stricter_wins)
{
	struct reactor r, *rs[] = { &r };
	struct volume *v = mem(1);
	struct vol_qos_limits l = { .iops = 100, .bandwidth = 1 << 20, .burst_ms = 50 };
	static struct tio t[20];
	struct rec rec = { 0 };
	uint64_t ops[20], bytes[20], t0;

	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	ck_assert_int_eq(vol_set_qos(v, &l), 0);
	t0 = reactor_now_ns();
	/* 10 small (iops-bound), then 10 of 64 KiB (bandwidth-bound). */
	for (int i = 0; i < 20; i++) {
		uint64_t len = i < 10 ? 512 : 64 << 10;
		submit(v, &r, &t[i], i, &rec, VOL_READ, len);
		ops[i] = (uint64_t)i + 1;
		bytes[i] = (i ? bytes[i - 1] : 0) + len;
	}
	run_until(rs, 1, &rec, 20);
	check_bound(&rec, 20, t0, ops, 100, 50 * NSEC_PER_MSEC);
	check_bound(&rec, 20, t0, bytes, 1 << 20, 50 * NSEC_PER_MSEC);
	/* 655 KiB at 1 MiB/s: the bandwidth bucket governed the end. */
	ck_assert_uint_ge(rec.when[19] - t0, (uint64_t)(bytes[19] - 52429) * NSEC_PER_SEC >> 20);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

START_TEST(read_not_held_by_write_limit)
{
	struct reactor r, *rs[] = { &r };
	struct volume *v = mem(1);
	struct vol_qos_limits l = { .write_iops = 5 }; /* 1 token, 200 ms apart */
	static struct tio t[4];
	struct rec rec = { 0 };

	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	ck_assert_int_eq(vol_set_qos(v, &l), 0);
	for (int i = 0; i < 3; i++)
		submit(v, &r, &t[i], i, &rec, VOL_WRITE, 4096);
	submit(v, &r, &t[3], 3, &rec, VOL_READ, 4096);
	run_until(rs, 1, &rec, 4);
	/* The read was admitted at once, so its callback (deferred) ran
	 * before any timer could release the queued writes. */
	ck_assert_int_eq(rec.order[0], 0);
	ck_assert_int_eq(rec.order[1], 3);
	ck_assert_int_eq(rec.order[2], 1);
	ck_assert_int_eq(rec.order[3], 2);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

START_TEST(limit_is_per_export_across_reactors)
{
	struct reactor r0, r1, *rs[] = { &r0, &r1 };
	struct volume *v = mem(2);
	struct vol_qos_limits l = { .iops = 40, .burst_ms = 100 }; /* 4 tokens */
	static struct tio t[24];
	struct rec rec = { 0 };
	uint64_t t0, last = 0;
	struct vol_qos_limits got;

	ck_assert_int_eq(reactor_init(&r0, 0, 64), 0);
	ck_assert_int_eq(reactor_init(&r1, 1, 64), 0);
	ck_assert_int_eq(vol_set_qos(v, &l), 0);
	vol_get_qos(v, &got);
	ck_assert_uint_eq(got.iops, 40);
	t0 = reactor_now_ns();
	for (int i = 0; i < 24; i++)
		submit(v, i % 2 ? &r1 : &r0, &t[i], i, &rec, VOL_READ, 4096);
	run_until(rs, 2, &rec, 24);
	/* 24 I/Os on two reactors share 40/s: 20 beyond the burst took
	 * 500 ms whichever reactor they came from. */
	for (int i = 0; i < 24; i++)
		if (rec.when[i] > last)
			last = rec.when[i];
	ck_assert_uint_ge(last - t0, 500 * NSEC_PER_MSEC);
	vol_destroy(v);
	reactor_fini(&r0);
	reactor_fini(&r1);
}
END_TEST

START_TEST(live_change_to_unlimited)
{
	struct reactor r, *rs[] = { &r };
	struct volume *v = mem(1);
	struct vol_qos_limits l = { .iops = 1 }, none = { 0 };
	static struct tio t[8];
	struct rec rec = { 0 };

	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	ck_assert_int_eq(vol_set_qos(v, &l), 0);
	submit(v, &r, &t[0], 0, &rec, VOL_READ, 4096);
	run_until(rs, 1, &rec, 1);
	ck_assert_int_eq(vol_set_qos(v, &none), 0);
	for (int i = 1; i < 8; i++)
		submit(v, &r, &t[i], i, &rec, VOL_READ, 4096);
	reactor_poll(&r, 0);
	ck_assert_int_eq(rec.n, 8);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

START_TEST(stats_snapshot)
{
	struct reactor r, *rs[] = { &r };
	struct volume *v = mem(1);
	static struct tio t[40];
	struct rec rec = { 0 };
	struct vol_stats_snap *s = malloc(sizeof(*s));

	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	for (int i = 0; i < 40; i++)
		submit(v, &r, &t[i], i, &rec, i < 30 ? VOL_READ : VOL_WRITE, 8192);
	ck_assert_int_eq(vol_stats_snapshot(v, s), 0);
	ck_assert_uint_eq(s->in_flight, 40);
	run_until(rs, 1, &rec, 40);
	vol_count_retry(&r, &t[0].io);
	ck_assert_int_eq(vol_stats_snapshot(v, s), 0);
	ck_assert_uint_eq(s->in_flight, 0);
	ck_assert_uint_eq(s->reads, 30);
	ck_assert_uint_eq(s->writes, 10);
	ck_assert_uint_eq(s->read_bytes, 30 * 8192);
	ck_assert_uint_eq(s->write_bytes, 10 * 8192);
	ck_assert_uint_eq(s->retries, 1);
	ck_assert_uint_eq(s->errors, 0);
	ck_assert_uint_eq(hist_count(&s->read_lat), 30);
	ck_assert_uint_eq(hist_count(&s->write_lat), 10);
	ck_assert_uint_le(s->read_us.p50, s->read_us.p95);
	ck_assert_uint_le(s->read_us.p95, s->read_us.p99);
	ck_assert_uint_le(s->read_us.p99, s->read_us.p999);
	ck_assert_uint_le(s->read_us.p999, hist_max(&s->read_lat) / 1000 + 1);
	ck_assert_uint_eq(hist_count_le(&s->read_lat, UINT64_MAX), 30);
	ck_assert_uint_eq(hist_count_le(&s->read_lat, 0), 0);
	ck_assert_int_eq(vol_stats_snapshot(NULL, s), -EINVAL);
	free(s);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

/* An export going away (SIGTERM, export-remove, reload) drains its
 * volume: what waits for QoS tokens goes to the backend at once rather
 * than at its token time (19 s here for the last of 20 at 1 IOPS), in
 * order, and what is submitted afterwards does not wait either.  The bound
 * is a quarter of the token time: only a drain that did nothing fails. */
START_TEST(drain_releases_queued_io)
{
	struct reactor r0, r1, *rs[] = { &r0, &r1 };
	struct volume *v = mem(2);
	struct vol_qos_limits l = { .iops = 1 };
	static struct tio t[24];
	struct rec rec = { 0 };
	struct vol_stats_snap *s = malloc(sizeof(*s));
	uint64_t give_up;

	ck_assert_int_eq(reactor_init(&r0, 0, 64), 0);
	ck_assert_int_eq(reactor_init(&r1, 1, 64), 0);
	ck_assert_int_eq(vol_set_qos(v, &l), 0);
	for (int i = 0; i < 20; i++)
		submit(v, i % 2 ? &r1 : &r0, &t[i], i, &rec, i % 3 ? VOL_READ : VOL_WRITE, 4096);
	reactor_poll(&r0, 0);
	reactor_poll(&r1, 0);
	ck_assert_int_le(rec.n, 2);
	vol_drain(v);
	vol_drain(v); /* a second drain (signal after export-remove) is harmless */
	for (int i = 20; i < 24; i++)
		submit(v, i % 2 ? &r1 : &r0, &t[i], i, &rec, VOL_READ, 4096);
	give_up = reactor_now_ns() + 5 * NSEC_PER_SEC;
	while (rec.n < 24 && reactor_now_ns() < give_up)
		for (unsigned i = 0; i < 2; i++)
			reactor_poll(rs[i], 5 * NSEC_PER_MSEC);
	ck_assert_msg(rec.n == 24, "%d of 24 I/Os done 5 s after the drain", rec.n);
	for (int i = 0; i < 24; i++)
		ck_assert_int_eq(rec.err[i], 0);
	/* Each reactor's queues went in their order, and the reads
	 * submitted after the drain behind those queued before it. */
	for (int i = 0, last[2][2] = { { -1, -1 }, { -1, -1 } }; i < 24; i++) {
		int idx = rec.order[i], *lp = &last[idx % 2][idx < 20 && idx % 3 == 0];

		ck_assert_int_gt(idx, *lp);
		*lp = idx;
	}
	ck_assert_int_eq(vol_stats_snapshot(v, s), 0);
	ck_assert_uint_eq(s->qos_queued, 0);
	ck_assert_uint_eq(s->in_flight, 0);
	free(s);
	vol_destroy(v);
	reactor_fini(&r0);
	reactor_fini(&r1);
}
END_TEST

/* The drain's message to a reactor with nothing queued may run after the
 * volume is gone (its exporters closed meanwhile): it must not touch freed
 * memory (the ASan build catches it). */
START_TEST(drain_message_outlives_volume)
{
	struct reactor r0, r1, *rs[] = { &r0, &r1 };
	struct volume *v = mem(2);
	struct vol_qos_limits l = { .iops = 1000 };
	static struct tio t[2];
	struct rec rec = { 0 };

	ck_assert_int_eq(reactor_init(&r0, 0, 64), 0);
	ck_assert_int_eq(reactor_init(&r1, 1, 64), 0);
	ck_assert_int_eq(vol_set_qos(v, &l), 0);
	submit(v, &r0, &t[0], 0, &rec, VOL_READ, 4096);
	submit(v, &r1, &t[1], 1, &rec, VOL_READ, 4096);
	run_until(rs, 2, &rec, 2);
	vol_drain(v);
	vol_destroy(v);
	for (int i = 0; i < 3; i++) {
		reactor_poll(&r0, 0);
		reactor_poll(&r1, 0);
	}
	reactor_fini(&r0);
	reactor_fini(&r1);
}
END_TEST

int main(void)
{
	unit_need_io_uring();
	Suite *s = suite_create("qos");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, zero_is_unlimited);
	tcase_add_test(tc, iops_limit_burst_and_order);
	tcase_add_test(tc, bandwidth_limit_keeps_fifo);
	tcase_add_test(tc, both_limits_the_stricter_wins);
	tcase_add_test(tc, read_not_held_by_write_limit);
	tcase_add_test(tc, limit_is_per_export_across_reactors);
	tcase_add_test(tc, live_change_to_unlimited);
	tcase_add_test(tc, stats_snapshot);
	tcase_add_test(tc, drain_releases_queued_io);
	tcase_add_test(tc, drain_message_outlives_volume);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
