/* The volume contract: validation up front (the callback never runs for a
 * rejected request), exactly one callback, never from inside vol_submit,
 * and on the submitting reactor even when another reactor did the work. */
#include "gateway/base/pipe_sink.h"
#include "gateway/volume/volume.h"
#include "unit_skip.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct done {
	int calls;
	int err;
	struct reactor *ran_on;
};

static __thread struct reactor *current;

static void cb(struct vol_io *io, int err)
{
	struct done *d = io->ctx;
	d->calls++;
	d->err = err;
	d->ran_on = current;
}

static struct volume *mem(uint32_t caps)
{
	struct volume *v;
	ck_assert_int_eq(vol_mem_create("t", 1 << 20, 512, caps, 2, &v), 0);
	return v;
}

static void io_init(struct vol_io *io, enum vol_op op, uint64_t off, uint64_t len,
		    struct iovec *iov, struct done *d)
{
	memset(io, 0, sizeof(*io));
	io->op = op;
	io->offset = off;
	io->length = len;
	io->iov = iov;
	io->iovcnt = iov ? 1 : 0;
	io->cb = cb;
	io->ctx = d;
}

#define ALL_CAPS (VOL_CAP_FLUSH | VOL_CAP_FUA | VOL_CAP_TRIM | VOL_CAP_WRITE_ZEROES)

START_TEST(rejects_without_callback)
{
	struct reactor r;
	struct volume *v = mem(ALL_CAPS);
	char buf[4096];
	struct iovec iov = { buf, sizeof(buf) };
	struct vol_io io;
	struct done d = { 0 };

	ck_assert_int_eq(reactor_init(&r, 0, 32), 0);
	current = &r;
	io_init(&io, VOL_READ, 1, 512, &iov, &d); /* misaligned offset */
	ck_assert_int_eq(vol_submit(v, &r, &io), -EINVAL);
	io_init(&io, VOL_READ, 0, 100, &iov, &d); /* misaligned length */
	ck_assert_int_eq(vol_submit(v, &r, &io), -EINVAL);
	io_init(&io, VOL_READ, 0, 0, &iov, &d); /* empty */
	ck_assert_int_eq(vol_submit(v, &r, &io), -EINVAL);
	io_init(&io, VOL_WRITE, (1 << 20) - 512, 1024, &iov, &d); /* past the end */
	ck_assert_int_eq(vol_submit(v, &r, &io), -ENOSPC);
	io_init(&io, VOL_WRITE, UINT64_MAX - 511, 512, &iov, &d); /* wraps */
	ck_assert_int_eq(vol_submit(v, &r, &io), -ENOSPC);
	struct iovec small = { buf, 512 };
	io_init(&io, VOL_WRITE, 0, 1024, &small, &d); /* buffer shorter than length */
	ck_assert_int_eq(vol_submit(v, &r, &io), -EINVAL);
	io_init(&io, VOL_WRITE_ZEROES, 0, 512, NULL, &d);
	io.flags = VOL_IO_FAST_ZERO; /* not VOL_CAP_FAST_ZERO */
	ck_assert_int_eq(vol_submit(v, &r, &io), -ENOTSUP);
	reactor_poll(&r, 0);
	ck_assert_int_eq(d.calls, 0);
	vol_destroy(v);

	v = mem(VOL_CAP_READ_ONLY);
	io_init(&io, VOL_WRITE, 0, 512, &iov, &d);
	ck_assert_int_eq(vol_submit(v, &r, &io), -EPERM);
	io_init(&io, VOL_TRIM, 0, 512, NULL, &d);
	ck_assert_int_eq(vol_submit(v, &r, &io), -EPERM);
	vol_destroy(v);

	v = mem(0);
	io_init(&io, VOL_TRIM, 0, 512, NULL, &d);
	ck_assert_int_eq(vol_submit(v, &r, &io), -EOPNOTSUPP);
	io_init(&io, VOL_WRITE_ZEROES, 0, 512, NULL, &d);
	ck_assert_int_eq(vol_submit(v, &r, &io), -EOPNOTSUPP);
	reactor_poll(&r, 0);
	ck_assert_int_eq(d.calls, 0);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

START_TEST(callback_deferred_once)
{
	struct reactor r;
	struct volume *v = mem(ALL_CAPS);
	char w[1024], rd[1024];
	struct iovec wi = { w, sizeof(w) }, ri = { rd, sizeof(rd) };
	struct vol_io io;
	struct done d = { 0 };

	ck_assert_int_eq(reactor_init(&r, 0, 32), 0);
	current = &r;
	memset(w, 0xa5, sizeof(w));
	io_init(&io, VOL_WRITE, 4096, sizeof(w), &wi, &d);
	io.flags = VOL_IO_FUA;
	ck_assert_int_eq(vol_submit(v, &r, &io), 0);
	ck_assert_int_eq(d.calls, 0); /* never from inside submit */
	reactor_poll(&r, 0);
	ck_assert_int_eq(d.calls, 1);
	ck_assert_int_eq(d.err, 0);
	reactor_poll(&r, 0);
	ck_assert_int_eq(d.calls, 1);
	ck_assert(memcmp(vol_mem_data(v) + 4096, w, sizeof(w)) == 0);

	io_init(&io, VOL_READ, 4096, sizeof(rd), &ri, &d);
	ck_assert_int_eq(vol_submit(v, &r, &io), 0);
	reactor_poll(&r, 0);
	ck_assert_int_eq(d.calls, 2);
	ck_assert(memcmp(rd, w, sizeof(w)) == 0);

	io_init(&io, VOL_WRITE_ZEROES, 4096, 512, NULL, &d);
	ck_assert_int_eq(vol_submit(v, &r, &io), 0);
	reactor_poll(&r, 0);
	ck_assert_int_eq(d.calls, 3);
	ck_assert_int_eq(vol_mem_data(v)[4096], 0);
	ck_assert_int_eq(vol_mem_data(v)[4096 + 512], 0xa5);

	io_init(&io, VOL_FLUSH, 0, 0, NULL, &d);
	ck_assert_int_eq(vol_submit(v, &r, &io), 0);
	reactor_poll(&r, 0);
	ck_assert_int_eq(d.calls, 4);
	ck_assert_uint_eq(v->stats[0].writes, 1);
	ck_assert_uint_eq(v->stats[0].reads, 1);
	ck_assert_uint_eq(v->stats[0].flushes, 1);
	ck_assert_uint_eq(v->stats[0].write_bytes, sizeof(w));
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

/* A backend that does the work on another reactor, as the nvmf volume
 * does for a reactor that owns no queue: the callback must still run on
 * the submitter's reactor. */
static struct reactor *worker;

static void on_worker(struct reactor_msg *m)
{
	struct vol_io *io = container_of(m, struct vol_io, msg);
	ck_assert_ptr_eq(current, worker);
	vol_complete(worker, io, -EIO);
}

static void remote_submit(struct volume *v, struct vol_io *io)
{
	(void)v;
	vol_forward(worker, io, on_worker);
}

static void remote_destroy(struct volume *v) { free(v->stats); }

static const struct vol_ops remote_ops = {
	.name = "remote",
	.submit = remote_submit,
	.destroy = remote_destroy,
};

static void *worker_main(void *arg)
{
	current = arg;
	reactor_run(arg);
	return NULL;
}

static void stop_worker(struct reactor_msg *m)
{
	(void)m;
	reactor_stop(worker);
}

START_TEST(completion_comes_home)
{
	struct reactor home, w;
	struct volume v = {
		.ops = &remote_ops, .size = 1 << 20, .block_size = 512, .caps = ALL_CAPS,
		.nr_stats = 2,
	};
	char buf[512];
	struct iovec iov = { buf, sizeof(buf) };
	struct vol_io io[8];
	struct done d[8];
	struct reactor_msg stop = { .fn = stop_worker };
	pthread_t th;

	v.stats = calloc(2, sizeof(*v.stats));
	ck_assert_int_eq(reactor_init(&home, 0, 32), 0);
	ck_assert_int_eq(reactor_init(&w, 1, 32), 0);
	worker = &w;
	current = &home;
	ck_assert_int_eq(pthread_create(&th, NULL, worker_main, &w), 0);
	memset(d, 0, sizeof(d));
	for (int i = 0; i < 8; i++) {
		io_init(&io[i], VOL_READ, (uint64_t)i * 512, 512, &iov, &d[i]);
		ck_assert_int_eq(vol_submit(&v, &home, &io[i]), 0);
	}
	for (int spins = 0; spins < 1000; spins++) {
		int done = 0;
		for (int i = 0; i < 8; i++)
			done += d[i].calls;
		if (done == 8)
			break;
		reactor_poll(&home, 10 * NSEC_PER_MSEC);
	}
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(d[i].calls, 1);
		ck_assert_int_eq(d[i].err, -EIO);
		ck_assert_ptr_eq(d[i].ran_on, &home);
	}
	ck_assert_uint_eq(v.stats[0].errors, 8);
	reactor_send_msg(&w, &stop);
	pthread_join(th, NULL);
	reactor_fini(&w);
	reactor_fini(&home);
	vol_destroy(&v);
}
END_TEST

static int flush_with(struct reactor *r, struct volume *v, uint64_t *cursor)
{
	struct vol_io io;
	struct done d = { 0 };

	io_init(&io, VOL_FLUSH, 0, 0, NULL, &d);
	io.loss_seen = cursor;
	ck_assert_int_eq(vol_submit(v, r, &io), 0);
	reactor_poll(r, 0);
	ck_assert_int_eq(d.calls, 1);
	return d.err;
}

/* A write loss (vol_note_loss) is reported once to each session, as
 * errseq(9) does: one client's flush does not use up the EIO another is
 * owed (the chaos harness's seed 3010923133: a FUSE fsync said success
 * for writes lost with the target's cache because the other open file
 * had taken the only EIO). */
START_TEST(loss_reported_to_each_session)
{
	struct reactor r;
	struct volume *v = mem(ALL_CAPS);

	ck_assert_int_eq(reactor_init(&r, 0, 32), 0);
	current = &r;
	uint64_t a = vol_loss_sample(v), b = vol_loss_sample(v);
	ck_assert_int_eq(flush_with(&r, v, &a), 0);
	vol_note_loss(v);
	ck_assert_int_eq(flush_with(&r, v, &b), -EIO);
	ck_assert_int_eq(flush_with(&r, v, &b), 0); /* once */
	ck_assert_int_eq(flush_with(&r, v, &a), -EIO); /* b took its EIO, a still gets one */
	ck_assert_int_eq(flush_with(&r, v, &a), 0);
	/* A session that begins once the loss was reported is owed nothing. */
	uint64_t c = vol_loss_sample(v);
	ck_assert_int_eq(flush_with(&r, v, &c), 0);
	/* One that begins after a loss nobody was told of hears of it. */
	vol_note_loss(v);
	uint64_t d = vol_loss_sample(v);
	ck_assert_int_eq(flush_with(&r, v, &d), -EIO);
	ck_assert_int_eq(flush_with(&r, v, &d), 0);
	ck_assert_int_eq(flush_with(&r, v, &c), -EIO);
	/* No cursor: the volume's own, once. */
	ck_assert_int_eq(flush_with(&r, v, NULL), -EIO);
	ck_assert_int_eq(flush_with(&r, v, NULL), 0);
	ck_assert_uint_eq(v->stats[0].errors, 5);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

/* A flush in flight when the loss happens cannot vouch for the lost
 * writes, even for a session that another flush already told. */
START_TEST(loss_during_flush_fails_it)
{
	struct reactor r;
	struct volume *v = mem(ALL_CAPS);
	struct vol_io io1, io2;
	struct done d1 = { 0 }, d2 = { 0 };

	ck_assert_int_eq(reactor_init(&r, 0, 32), 0);
	current = &r;
	uint64_t a = vol_loss_sample(v);
	io_init(&io1, VOL_FLUSH, 0, 0, NULL, &d1);
	io1.loss_seen = &a;
	io_init(&io2, VOL_FLUSH, 0, 0, NULL, &d2);
	io2.loss_seen = &a;
	ck_assert_int_eq(vol_submit(v, &r, &io1), 0);
	ck_assert_int_eq(vol_submit(v, &r, &io2), 0);
	vol_note_loss(v); /* both in flight (their callbacks are deferred) */
	reactor_poll(&r, 0);
	ck_assert_int_eq(d1.calls, 1);
	ck_assert_int_eq(d2.calls, 1);
	ck_assert_int_eq(d1.err, -EIO);
	ck_assert_int_eq(d2.err, -EIO);
	ck_assert_int_eq(flush_with(&r, v, &a), 0);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

/* Two flushes of one session in flight, submitted after a loss it had not
 * been told of: both fail, not only the first to end (the second would
 * otherwise find the cursor advanced and vouch for the lost writes). */
START_TEST(loss_before_two_flushes_fails_both)
{
	struct reactor r;
	struct volume *v = mem(ALL_CAPS);
	struct vol_io io1, io2;
	struct done d1 = { 0 }, d2 = { 0 };

	ck_assert_int_eq(reactor_init(&r, 0, 32), 0);
	current = &r;
	uint64_t a = vol_loss_sample(v);
	vol_note_loss(v);
	io_init(&io1, VOL_FLUSH, 0, 0, NULL, &d1);
	io1.loss_seen = &a;
	io_init(&io2, VOL_FLUSH, 0, 0, NULL, &d2);
	io2.loss_seen = &a;
	ck_assert_int_eq(vol_submit(v, &r, &io1), 0);
	ck_assert_int_eq(vol_submit(v, &r, &io2), 0);
	reactor_poll(&r, 0);
	ck_assert_int_eq(d1.err, -EIO);
	ck_assert_int_eq(d2.err, -EIO);
	ck_assert_int_eq(flush_with(&r, v, &a), 0);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

/* A session that ends without having been told of a loss (or abruptly,
 * its EIO perhaps never delivered) hands it to the next session: a
 * client that reconnects and resends its flush gets EIO, not success. */
START_TEST(loss_unheard_goes_to_next_session)
{
	struct reactor r;
	struct volume *v = mem(ALL_CAPS);

	ck_assert_int_eq(reactor_init(&r, 0, 32), 0);
	current = &r;
	uint64_t a = vol_loss_sample(v), b = vol_loss_sample(v);
	uint64_t a_start = a;
	vol_note_loss(v);
	ck_assert_int_eq(flush_with(&r, v, &a), -EIO); /* a is told, then drops */
	ck_assert_int_eq(flush_with(&r, v, &b), -EIO);
	uint64_t c = vol_loss_sample(v);
	ck_assert_int_eq(flush_with(&r, v, &c), 0); /* reported: nothing owed */
	vol_loss_session_end(v, a_start); /* a ended abruptly */
	uint64_t a2 = vol_loss_sample(v);
	ck_assert_int_eq(flush_with(&r, v, &a2), -EIO); /* its reconnect */
	ck_assert_int_eq(flush_with(&r, v, &a2), 0);
	vol_loss_session_end(v, b); /* b ended in order, told: nothing moves */
	uint64_t d = vol_loss_sample(v);
	ck_assert_int_eq(flush_with(&r, v, &d), 0);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

/* The RAM volume cannot take a write from a pipe (no pipe_writes):
 * vol_submit takes the payload out into the buffer first, so the volume
 * stores the right bytes and the pipe is left empty for its owner. */
START_TEST(mem_write_from_pipe)
{
	struct reactor r;
	struct volume *v = mem(ALL_CAPS);
	static uint8_t data[65536], buf[65536], back[65536];
	struct iovec wi = { buf, sizeof(buf) }, ri = { back, sizeof(back) };
	struct pipe_sink sk;
	struct vol_io io;
	struct done d = { 0 };
	uint8_t b;

	ck_assert_int_eq(reactor_init(&r, 0, 32), 0);
	current = &r;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 17 + (i >> 8) + 1);
	ck_assert_int_eq(pipe_sink_open(&sk, 256 * 1024), 0);
	ck_assert_int_eq(pipe_sink_put(&sk, data, sizeof(data)), 0);
	io_init(&io, VOL_WRITE, 8192, sizeof(data), &wi, &d);
	io.sink = &sk;
	ck_assert_int_eq(vol_submit(v, &r, &io), 0);
	ck_assert_uint_eq(sk.filled, 0);
	ck_assert(!sk.broken);
	ck_assert_int_eq(read(sk.rfd, &b, 1), -1);
	reactor_poll(&r, 0);
	ck_assert_int_eq(d.calls, 1);
	ck_assert_int_eq(d.err, 0);
	ck_assert(memcmp(vol_mem_data(v) + 8192, data, sizeof(data)) == 0);
	ck_assert_int_eq(vol_mem_data(v)[8191], 0);
	ck_assert_int_eq(vol_mem_data(v)[8192 + sizeof(data)], 0);
	io_init(&io, VOL_READ, 8192, sizeof(back), &ri, &d);
	ck_assert_int_eq(vol_submit(v, &r, &io), 0);
	reactor_poll(&r, 0);
	ck_assert_int_eq(d.calls, 2);
	ck_assert_int_eq(d.err, 0);
	ck_assert(memcmp(back, data, sizeof(data)) == 0);

	/* A pipe that broke lost the payload: refused, no callback, nothing
	 * written. */
	memset(buf, 0x5a, sizeof(buf));
	ck_assert_int_eq(pipe_sink_put(&sk, data, 4096), 0);
	sk.broken = true;
	io_init(&io, VOL_WRITE, 0, 4096, &wi, &d);
	io.sink = &sk;
	ck_assert_int_eq(vol_submit(v, &r, &io), -EIO);
	reactor_poll(&r, 0);
	ck_assert_int_eq(d.calls, 2);
	ck_assert_int_eq(vol_mem_data(v)[0], 0);
	pipe_sink_close(&sk);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

START_TEST(caps_names)
{
	char buf[128];
	ck_assert_str_eq(vol_caps_str(0, buf, sizeof(buf)), "none");
	ck_assert_str_eq(vol_caps_str(VOL_CAP_FLUSH | VOL_CAP_TRIM, buf, sizeof(buf)),
			 "flush,trim");
	ck_assert_str_eq(vol_op_name(VOL_WRITE_ZEROES), "write-zeroes");
	/* Truncation never overruns. */
	vol_caps_str(0x3f, buf, 8);
	ck_assert(strlen(buf) < 8);
}
END_TEST

START_TEST(mem_rejects_bad_geometry)
{
	struct volume *v;
	ck_assert_int_eq(vol_mem_create("x", 1000, 512, 0, 1, &v), -EINVAL);
	ck_assert_int_eq(vol_mem_create("x", 4096, 1000, 0, 1, &v), -EINVAL);
	ck_assert_int_eq(vol_mem_create("x", 0, 512, 0, 1, &v), -EINVAL);
	ck_assert_int_eq(vol_mem_create("x", 8192, 4096, 0, 1, &v), 0);
	ck_assert_uint_eq(v->pref_io, 4096);
	vol_destroy(v);
}
END_TEST

int main(void)
{
	unit_need_io_uring();
	Suite *s = suite_create("volume");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, rejects_without_callback);
	tcase_add_test(tc, callback_deferred_once);
	tcase_add_test(tc, completion_comes_home);
	tcase_add_test(tc, loss_reported_to_each_session);
	tcase_add_test(tc, loss_during_flush_fails_it);
	tcase_add_test(tc, loss_before_two_flushes_fails_both);
	tcase_add_test(tc, loss_unheard_goes_to_next_session);
	tcase_add_test(tc, caps_names);
	tcase_add_test(tc, mem_rejects_bad_geometry);
	tcase_add_test(tc, mem_write_from_pipe);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
