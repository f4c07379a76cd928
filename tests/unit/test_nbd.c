/* The NBD server driven over socketpairs from this thread: the test plays
 * the client with raw bytes and polls the server's reactor while it waits,
 * so every malformed input can be sent exactly as a hostile client would. */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gateway/config.h"
#include "gateway/base/log.h"
#include "gateway/base/membudget.h"
#include "gateway/base/reactor.h"
#include "gateway/volume/volume.h"
#include "nbd/internal.h"
#include "nbd/nbd.h"
#include "nbd/proto.h"
#include "unit_skip.h"

#define ALL_CAPS (VOL_CAP_FLUSH | VOL_CAP_FUA | VOL_CAP_TRIM | VOL_CAP_WRITE_ZEROES | \
		  VOL_CAP_FAST_ZERO)
#define VOL_SIZE (1u << 20)

/* ---- a volume with a volatile cache, to see what FLUSH really covers ---- */

struct cvol {
	struct volume v;
	uint8_t *cache, *durable;
	unsigned flushes;
	bool fail_io;
};

static void cvol_submit(struct volume *v, struct vol_io *io)
{
	struct cvol *cv = container_of(v, struct cvol, v);
	int err = 0;

	if (cv->fail_io && io->op != VOL_FLUSH) {
		vol_complete(io->origin, io, -EIO);
		return;
	}
	switch (io->op) {
	case VOL_READ:
		memcpy(io->iov[0].iov_base, cv->cache + io->offset, io->length);
		break;
	case VOL_WRITE:
		memcpy(cv->cache + io->offset, io->iov[0].iov_base, io->length);
		if (io->flags & VOL_IO_FUA)
			memcpy(cv->durable + io->offset, io->iov[0].iov_base, io->length);
		break;
	case VOL_FLUSH:
		/* Like an NVMe Flush: everything completed so far, any queue. */
		memcpy(cv->durable, cv->cache, v->size);
		cv->flushes++;
		break;
	case VOL_WRITE_ZEROES:
	case VOL_TRIM:
		memset(cv->cache + io->offset, 0, io->length);
		break;
	}
	vol_complete(io->origin, io, err);
}

static void cvol_destroy(struct volume *v)
{
	struct cvol *cv = container_of(v, struct cvol, v);
	free(cv->cache);
	free(cv->durable);
	free(v->stats);
	free(cv);
}

static const struct vol_ops cvol_ops = {
	.name = "cache-test",
	.submit = cvol_submit,
	.destroy = cvol_destroy,
};

static struct cvol *cvol_new(uint32_t caps)
{
	struct cvol *cv = calloc(1, sizeof(*cv));
	ck_assert_ptr_nonnull(cv);
	cv->cache = calloc(1, VOL_SIZE);
	cv->durable = calloc(1, VOL_SIZE);
	cv->v.stats = calloc(1, sizeof(*cv->v.stats));
	cv->v.nr_stats = 1;
	snprintf(cv->v.name, sizeof(cv->v.name), "cvol");
	cv->v.ops = &cvol_ops;
	cv->v.size = VOL_SIZE;
	cv->v.block_size = 512;
	cv->v.pref_io = 4096;
	cv->v.max_io = 128 * 1024;
	cv->v.caps = caps;
	return cv;
}

/* ---- the test client ---- */

struct client {
	int fd;
	struct nbd_conn *c;
	int closed;
	int err;
};

static struct reactor R;
static struct volume *V;
static struct nbd_export E[2];
static struct nbd_export *EX[2];

static void setup_caps(uint32_t caps, uint32_t bs)
{
	log_set_level(LOG_LVL_ERR);
	ck_assert_int_eq(reactor_init(&R, 0, 256), 0);
	ck_assert_int_eq(vol_mem_create("t", VOL_SIZE, bs, caps, 1, &V), 0);
	V->max_io = 128 * 1024;
	E[0] = (struct nbd_export){ .name = "disk", .description = "a test disk", .vol = V };
	E[1] = (struct nbd_export){ .name = "ro", .vol = V, .read_only = true };
	EX[0] = &E[0];
	EX[1] = &E[1];
}

static void setup(void) { setup_caps(ALL_CAPS, 512); }

static void teardown(void)
{
	for (int i = 0; i < 20; i++)
		reactor_poll(&R, 1000000);
	vol_destroy(V);
	reactor_fini(&R);
}

static void on_closed(void *arg, int err)
{
	struct client *cl = arg;
	cl->closed++;
	cl->err = err;
}

static void pump(void) { reactor_poll(&R, 2 * NSEC_PER_MSEC); }

/* A hang guard, not a timing assertion: nothing here takes a second. */
#define GUARD_NS (20 * NSEC_PER_SEC)

static void cl_start(struct client *cl, bool kernel, struct nbd_export *e)
{
	int sv[2];

	memset(cl, 0, sizeof(*cl));
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	cl->fd = sv[0];
	if (kernel)
		ck_assert_int_eq(nbd_conn_start_kernel(&R, e, sv[1], on_closed, cl, &cl->c), 0);
	else
		ck_assert_int_eq(nbd_conn_start_newstyle(&R, EX, 2, sv[1], "test", on_closed, cl,
							 &cl->c),
				 0);
}

static void cl_write(struct client *cl, const void *p, size_t n)
{
	uint64_t end = reactor_now_ns() + GUARD_NS;
	const uint8_t *b = p;

	while (n) {
		ssize_t r = send(cl->fd, b, n, MSG_NOSIGNAL);
		if (r > 0) {
			b += r;
			n -= (size_t)r;
			continue;
		}
		ck_assert_msg(r < 0 && errno == EAGAIN, "send: %s", strerror(errno));
		ck_assert_msg(reactor_now_ns() < end, "send stuck");
		pump();
	}
	pump();
}

/* 0, or -1 on EOF. */
static int cl_read(struct client *cl, void *p, size_t n)
{
	uint64_t end = reactor_now_ns() + GUARD_NS;
	uint8_t *b = p;

	while (n) {
		ssize_t r = recv(cl->fd, b, n, 0);
		if (r > 0) {
			b += r;
			n -= (size_t)r;
			continue;
		}
		if (r == 0)
			return -1;
		ck_assert_msg(errno == EAGAIN, "recv: %s", strerror(errno));
		ck_assert_msg(reactor_now_ns() < end, "reply never came");
		pump();
	}
	return 0;
}

/* The server closes: EOF on our side and closed() once, with err. */
static void cl_expect_closed(struct client *cl, int err)
{
	uint8_t junk[4096];
	uint64_t end = reactor_now_ns() + GUARD_NS;

	while (cl_read(cl, junk, 1) == 0)
		;
	while (!cl->closed) {
		ck_assert_msg(reactor_now_ns() < end, "closed() never ran");
		pump();
	}
	ck_assert_int_eq(cl->closed, 1);
	ck_assert_int_eq(cl->err, err);
	close(cl->fd);
}

static void cl_end(struct client *cl)
{
	uint8_t d[28] = { 0 };
	uint32_t m = htobe32(NBD_REQUEST_MAGIC);
	uint16_t t = htobe16(NBD_CMD_DISC);
	memcpy(d, &m, 4);
	memcpy(d + 6, &t, 2);
	cl_write(cl, d, sizeof(d));
	cl_expect_closed(cl, 0);
}

static void put32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }
static void put16(uint8_t *p, uint16_t v) { v = htobe16(v); memcpy(p, &v, 2); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return be16toh(v); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }

static void cl_greeting(struct client *cl, uint32_t cflags)
{
	uint8_t g[18], f[4];

	ck_assert_int_eq(cl_read(cl, g, sizeof(g)), 0);
	ck_assert_uint_eq(get64(g), NBD_MAGIC);
	ck_assert_uint_eq(get64(g + 8), NBD_IHAVEOPT);
	ck_assert_uint_eq(get16(g + 16), NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	put32(f, cflags);
	cl_write(cl, f, 4);
}

static void opt_send(struct client *cl, uint32_t opt, const void *data, uint32_t len)
{
	uint8_t h[16];

	put64(h, NBD_IHAVEOPT);
	put32(h + 8, opt);
	put32(h + 12, len);
	cl_write(cl, h, 16);
	if (len)
		cl_write(cl, data, len);
}

/* Reads one option reply for opt; its type, data into buf (up to cap). */
static uint32_t opt_reply(struct client *cl, uint32_t opt, uint8_t *buf, uint32_t cap,
			  uint32_t *len)
{
	uint8_t h[20];

	ck_assert_int_eq(cl_read(cl, h, 20), 0);
	ck_assert_uint_eq(get64(h), NBD_OPT_REPLY_MAGIC);
	ck_assert_uint_eq(get32(h + 8), opt);
	uint32_t l = get32(h + 16);
	ck_assert_uint_le(l, cap);
	if (l)
		ck_assert_int_eq(cl_read(cl, buf, l), 0);
	if (len)
		*len = l;
	return get32(h + 12);
}

static uint32_t opt_simple(struct client *cl, uint32_t opt, const void *data, uint32_t len)
{
	uint8_t buf[256];
	opt_send(cl, opt, data, len);
	return opt_reply(cl, opt, buf, sizeof(buf), NULL);
}

static uint32_t info_data(const char *name, const uint16_t *reqs, unsigned n, uint8_t *d)
{
	uint32_t nl = (uint32_t)strlen(name);
	put32(d, nl);
	memcpy(d + 4, name, nl);
	put16(d + 4 + nl, (uint16_t)n);
	for (unsigned i = 0; i < n; i++)
		put16(d + 6 + nl + 2 * i, reqs[i]);
	return 6 + nl + 2 * n;
}

struct info {
	uint64_t size;
	uint16_t flags;
	uint32_t min, pref, max;
	char name[64], desc[64];
	uint32_t final;
};

static void opt_info(struct client *cl, uint32_t opt, const char *name, struct info *in)
{
	static const uint16_t reqs[] = { NBD_INFO_NAME, NBD_INFO_DESCRIPTION, NBD_INFO_BLOCK_SIZE };
	uint8_t d[128], buf[512];
	uint32_t l, type;

	memset(in, 0, sizeof(*in));
	opt_send(cl, opt, d, info_data(name, reqs, 3, d));
	while ((type = opt_reply(cl, opt, buf, sizeof(buf), &l)) == NBD_REP_INFO) {
		switch (get16(buf)) {
		case NBD_INFO_EXPORT:
			ck_assert_uint_eq(l, 12);
			in->size = get64(buf + 2);
			in->flags = get16(buf + 10);
			break;
		case NBD_INFO_BLOCK_SIZE:
			ck_assert_uint_eq(l, 14);
			in->min = get32(buf + 2);
			in->pref = get32(buf + 6);
			in->max = get32(buf + 10);
			break;
		case NBD_INFO_NAME:
			memcpy(in->name, buf + 2, l - 2);
			break;
		case NBD_INFO_DESCRIPTION:
			memcpy(in->desc, buf + 2, l - 2);
			break;
		}
	}
	in->final = type;
}

/* Handshake to transmission on export name. */
static void cl_go(struct client *cl, const char *name, bool structured, bool extended,
		  struct info *in)
{
	cl_greeting(cl, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	if (structured)
		ck_assert_uint_eq(opt_simple(cl, NBD_OPT_STRUCTURED_REPLY, NULL, 0), NBD_REP_ACK);
	if (extended)
		ck_assert_uint_eq(opt_simple(cl, NBD_OPT_EXTENDED_HEADERS, NULL, 0), NBD_REP_ACK);
	opt_info(cl, NBD_OPT_GO, name, in);
	ck_assert_uint_eq(in->final, NBD_REP_ACK);
}

static void req_send(struct client *cl, uint16_t flags, uint16_t type, uint64_t cookie,
		     uint64_t off, uint32_t len, const void *data)
{
	uint8_t h[28];
	put32(h, NBD_REQUEST_MAGIC);
	put16(h + 4, flags);
	put16(h + 6, type);
	put64(h + 8, cookie);
	put64(h + 16, off);
	put32(h + 24, len);
	cl_write(cl, h, 28);
	if (data)
		cl_write(cl, data, len);
}

static void req_ext(struct client *cl, uint16_t flags, uint16_t type, uint64_t cookie,
		    uint64_t off, uint64_t len, const void *data)
{
	uint8_t h[32];
	put32(h, NBD_EXTENDED_REQUEST_MAGIC);
	put16(h + 4, flags);
	put16(h + 6, type);
	put64(h + 8, cookie);
	put64(h + 16, off);
	put64(h + 24, len);
	cl_write(cl, h, 32);
	if (data)
		cl_write(cl, data, len);
}

/* A simple reply: its error; data_len bytes follow when error is 0. */
static uint32_t simple_reply(struct client *cl, uint64_t cookie, void *data, size_t data_len)
{
	uint8_t h[16];
	ck_assert_int_eq(cl_read(cl, h, 16), 0);
	ck_assert_uint_eq(get32(h), NBD_SIMPLE_REPLY_MAGIC);
	ck_assert_uint_eq(get64(h + 8), cookie);
	uint32_t err = get32(h + 4);
	if (!err && data_len)
		ck_assert_int_eq(cl_read(cl, data, data_len), 0);
	return err;
}

static uint32_t do_req(struct client *cl, uint16_t flags, uint16_t type, uint64_t off,
		       uint32_t len, const void *wdata, void *rdata)
{
	static uint64_t cookie = 100;
	cookie++;
	req_send(cl, flags, type, cookie, off, len, wdata);
	return simple_reply(cl, cookie, rdata, type == NBD_CMD_READ ? len : 0);
}

/* ---- the buffer budget ---- */

/* True when a reply (or EOF) arrives within ms of pumping. */
static bool reply_within(struct client *cl, unsigned ms)
{
	uint64_t end = reactor_now_ns() + ms * NSEC_PER_MSEC;
	uint8_t b;

	while (reactor_now_ns() < end) {
		if (recv(cl->fd, &b, 1, MSG_PEEK) >= 0)
			return true;
		pump();
	}
	return false;
}

/* The budget spent by someone else: a socket client stops (its request
 * waits, it is not failed) and goes on when buffers come back; the
 * kernel device is served at once (it never waits behind others). */
START_TEST(budget_spent_waits_kernel_served)
{
	struct membudget *b = membudget_global();
	struct client sock, kern;
	struct info in;
	uint8_t r[65536];

	membudget_init(b, 1u << 20, 30);
	membudget_charge(b, 2u << 20);
	cl_start(&sock, false, NULL);
	cl_go(&sock, "disk", false, false, &in);
	cl_start(&kern, true, &E[0]);
	req_send(&sock, 0, NBD_CMD_READ, 7, 0, sizeof(r), NULL);
	ck_assert_msg(!reply_within(&sock, 200), "served past the budget");
	ck_assert_uint_eq(membudget_waiters(b), 1);
	ck_assert_uint_eq(do_req(&kern, 0, NBD_CMD_READ, 0, sizeof(r), NULL, r), 0);
	membudget_give(b, 2u << 20);
	ck_assert_uint_eq(simple_reply(&sock, 7, r, sizeof(r)), 0);
	ck_assert_uint_eq(membudget_waiters(b), 0);
	cl_end(&sock);
	cl_end(&kern);
	for (int i = 0; i < 10; i++)
		pump();
	/* Every buffer is back once both are gone. */
	ck_assert_uint_eq(membudget_used(b), 0);
	membudget_init(b, MEMBUDGET_DEFAULT_BYTES, 0);
}
END_TEST

/* ---- handshake ---- */

START_TEST(greeting_and_abort)
{
	struct client cl;
	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_ABORT, "x", 1), NBD_REP_ACK);
	cl_expect_closed(&cl, 0);
}
END_TEST

START_TEST(unknown_client_flags_close)
{
	struct client cl;
	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE | 0x100);
	cl_expect_closed(&cl, -EPROTO);
}
END_TEST

START_TEST(bad_option_magic_closes)
{
	struct client cl;
	uint8_t h[16] = "NOTMAGIC";
	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	cl_write(&cl, h, 16);
	cl_expect_closed(&cl, -EPROTO);
}
END_TEST

START_TEST(option_count_capped)
{
	struct client cl;
	unsigned acks = 0;
	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	for (unsigned i = 0; i < 64; i++)
		acks += opt_simple(&cl, NBD_OPT_STRUCTURED_REPLY, NULL, 0) == NBD_REP_ACK;
	ck_assert_uint_eq(acks, 64);
	opt_send(&cl, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
	cl_expect_closed(&cl, -EPROTO);
}
END_TEST

START_TEST(option_length_capped)
{
	struct client cl;
	static uint8_t big[20000];
	struct info in;

	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	/* Long but skippable: refused, the session goes on. */
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_GO, big, sizeof(big)), NBD_REP_ERR_TOO_BIG);
	opt_info(&cl, NBD_OPT_INFO, "disk", &in);
	ck_assert_uint_eq(in.final, NBD_REP_ACK);
	/* Absurd: closed without reading it. */
	opt_send(&cl, NBD_OPT_LIST, NULL, 0);
	uint8_t h[16];
	put64(h, NBD_IHAVEOPT);
	put32(h + 8, NBD_OPT_GO);
	put32(h + 12, 0x7fffffff);
	uint8_t buf[256];
	while (opt_reply(&cl, NBD_OPT_LIST, buf, sizeof(buf), NULL) != NBD_REP_ACK)
		;
	cl_write(&cl, h, 16);
	cl_expect_closed(&cl, -EPROTO);
}
END_TEST

START_TEST(export_name_long_closes)
{
	struct client cl;
	uint8_t h[16];
	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	/* Closed on the header alone: no way to refuse it otherwise. */
	put64(h, NBD_IHAVEOPT);
	put32(h + 8, NBD_OPT_EXPORT_NAME);
	put32(h + 12, 9000);
	cl_write(&cl, h, 16);
	cl_expect_closed(&cl, -EPROTO);
}
END_TEST

START_TEST(unsupported_options)
{
	struct client cl;
	static const uint32_t opts[] = { NBD_OPT_STARTTLS, NBD_OPT_PEEK_EXPORT,
					 NBD_OPT_LIST_META_CONTEXT, NBD_OPT_SET_META_CONTEXT, 12,
					 0xdeadbeef };
	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	for (unsigned i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		ck_assert_uint_eq(opt_simple(&cl, opts[i], "abcd", 4), NBD_REP_ERR_UNSUP);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_ABORT, NULL, 0), NBD_REP_ACK);
	cl_expect_closed(&cl, 0);
}
END_TEST

START_TEST(list_exports)
{
	struct client cl;
	uint8_t buf[256];
	uint32_t l;
	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_LIST, "x", 1), NBD_REP_ERR_INVALID);
	opt_send(&cl, NBD_OPT_LIST, NULL, 0);
	ck_assert_uint_eq(opt_reply(&cl, NBD_OPT_LIST, buf, sizeof(buf), &l), NBD_REP_SERVER);
	ck_assert_uint_eq(get32(buf), 4);
	ck_assert(!memcmp(buf + 4, "disk", 4));
	ck_assert_uint_eq(opt_reply(&cl, NBD_OPT_LIST, buf, sizeof(buf), &l), NBD_REP_SERVER);
	ck_assert_uint_eq(get32(buf), 2);
	ck_assert(!memcmp(buf + 4, "ro", 2));
	ck_assert_uint_eq(opt_reply(&cl, NBD_OPT_LIST, buf, sizeof(buf), &l), NBD_REP_ACK);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_ABORT, NULL, 0), NBD_REP_ACK);
	cl_expect_closed(&cl, 0);
}
END_TEST

START_TEST(info_malformed)
{
	struct client cl;
	uint8_t d[64];
	struct info in;

	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	/* Shorter than name length + count. */
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_INFO, "\0\0\0", 3), NBD_REP_ERR_INVALID);
	/* Name length beyond the option. */
	put32(d, 100);
	put16(d + 4, 0);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_GO, d, 6), NBD_REP_ERR_INVALID);
	/* Request count that does not match the length. */
	uint32_t l = info_data("disk", NULL, 0, d);
	put16(d + 8, 3);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_GO, d, l), NBD_REP_ERR_INVALID);
	/* No such export. */
	opt_info(&cl, NBD_OPT_GO, "nope", &in);
	ck_assert_uint_eq(in.final, NBD_REP_ERR_UNKNOWN);
	ck_assert_uint_eq(in.size, 0);
	/* After all that, a good INFO still works, and we stay in options. */
	opt_info(&cl, NBD_OPT_INFO, "disk", &in);
	ck_assert_uint_eq(in.final, NBD_REP_ACK);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_ABORT, NULL, 0), NBD_REP_ACK);
	cl_expect_closed(&cl, 0);
}
END_TEST

START_TEST(info_contents)
{
	struct client cl;
	struct info in;

	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	opt_info(&cl, NBD_OPT_INFO, "disk", &in);
	ck_assert_uint_eq(in.final, NBD_REP_ACK);
	ck_assert_uint_eq(in.size, VOL_SIZE);
	ck_assert_uint_eq(in.flags, nbd_export_flags(&E[0]));
	ck_assert_uint_eq(in.min, 512);
	ck_assert_uint_eq(in.pref, 4096);
	ck_assert_uint_eq(in.max, 128 * 1024);
	ck_assert_str_eq(in.name, "disk");
	ck_assert_str_eq(in.desc, "a test disk");
	opt_info(&cl, NBD_OPT_INFO, "ro", &in);
	ck_assert(in.flags & NBD_FLAG_READ_ONLY);
	/* "" is the default export, the first one. */
	opt_info(&cl, NBD_OPT_GO, "", &in);
	ck_assert_uint_eq(in.final, NBD_REP_ACK);
	ck_assert_str_eq(in.name, "disk");
	ck_assert(!(in.flags & NBD_FLAG_SEND_DF)); /* no structured replies */
	cl_end(&cl);
}
END_TEST

START_TEST(export_name_paths)
{
	struct client cl;
	uint8_t r[512];

	/* Without NO_ZEROES: size, flags and 124 zero bytes. */
	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	opt_send(&cl, NBD_OPT_EXPORT_NAME, "disk", 4);
	ck_assert_int_eq(cl_read(&cl, r, 10 + 124), 0);
	ck_assert_uint_eq(get64(r), VOL_SIZE);
	ck_assert_uint_eq(get16(r + 8), nbd_export_flags(&E[0]));
	for (unsigned i = 10; i < 10 + 124; i++)
		ck_assert_uint_eq(r[i], 0);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 0, 512, NULL, r), 0);
	cl_end(&cl);

	/* An unknown name cannot be answered: closed, with one log line in
	 * which the client's bytes cannot start a line of their own (they
	 * once went to the log raw: a forged line). */
	static const char forged[] = "x\nnvmf-gateway: notice: forged";
	char logged[512] = "";
	FILE *lf = tmpfile();
	int saved = dup(2);
	ck_assert_ptr_nonnull(lf);
	log_set_level(LOG_LVL_WARN);
	fflush(stderr);
	dup2(fileno(lf), 2);
	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	opt_send(&cl, NBD_OPT_EXPORT_NAME, forged, sizeof(forged) - 1);
	cl_expect_closed(&cl, -ENOENT);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	log_set_level(LOG_LVL_ERR);
	rewind(lf);
	size_t got = fread(logged, 1, sizeof(logged) - 1, lf);
	logged[got] = 0;
	fclose(lf);
	ck_assert_msg(strstr(logged, "no export 'x?nvmf-gateway: notice: forged'"), "logged: %s", logged);
	ck_assert_msg(!strstr(logged, "\nnvmf-gateway: notice: forged"), "a forged line: %s", logged);

	/* Extended headers forbid EXPORT_NAME. */
	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_EXTENDED_HEADERS, NULL, 0), NBD_REP_ACK);
	opt_send(&cl, NBD_OPT_EXPORT_NAME, "", 0);
	cl_expect_closed(&cl, -EPROTO);
}
END_TEST

START_TEST(structured_and_extended_options)
{
	struct client cl;
	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_STRUCTURED_REPLY, "x", 1), NBD_REP_ERR_INVALID);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_EXTENDED_HEADERS, "x", 1), NBD_REP_ERR_INVALID);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_EXTENDED_HEADERS, NULL, 0), NBD_REP_ACK);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_STRUCTURED_REPLY, NULL, 0),
			  NBD_REP_ERR_EXT_HEADER_REQD);
	ck_assert_uint_eq(opt_simple(&cl, NBD_OPT_ABORT, NULL, 0), NBD_REP_ACK);
	cl_expect_closed(&cl, 0);
}
END_TEST

START_TEST(client_hangup_in_handshake)
{
	struct client cl;
	cl_start(&cl, false, NULL);
	cl_greeting(&cl, NBD_FLAG_C_FIXED_NEWSTYLE);
	opt_send(&cl, NBD_OPT_GO, NULL, 0); /* header claims nothing more */
	shutdown(cl.fd, SHUT_WR);
	cl_expect_closed(&cl, -ECONNRESET);
}
END_TEST

/* ---- transmission ---- */

START_TEST(simple_write_read)
{
	struct client cl;
	struct info in;
	uint8_t w[8192], r[8192];

	for (unsigned i = 0; i < sizeof(w); i++)
		w[i] = (uint8_t)(i * 7 + 3);
	cl_start(&cl, false, NULL);
	cl_go(&cl, "disk", false, false, &in);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_WRITE, 4096, sizeof(w), w, NULL), 0);
	ck_assert(!memcmp(vol_mem_data(V) + 4096, w, sizeof(w)));
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 4096, sizeof(r), NULL, r), 0);
	ck_assert(!memcmp(r, w, sizeof(w)));
	ck_assert_uint_eq(do_req(&cl, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 0, 512, w, NULL), 0);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_FLUSH, 0, 0, NULL, NULL), 0);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_TRIM, 4096, 4096, NULL, NULL), 0);
	ck_assert_uint_eq(vol_mem_data(V)[4096], 0);
	ck_assert_uint_eq(do_req(&cl, NBD_CMD_FLAG_NO_HOLE, NBD_CMD_WRITE_ZEROES, 8192, 4096,
				 NULL, NULL), 0);
	ck_assert_uint_eq(vol_mem_data(V)[8192], 0);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_CACHE, 0, 65536, NULL, NULL), 0);
	/* FAST_ZERO with NO_HOLE cannot be cheap: a quick ENOTSUP. */
	ck_assert_uint_eq(do_req(&cl, NBD_CMD_FLAG_FAST_ZERO | NBD_CMD_FLAG_NO_HOLE,
				 NBD_CMD_WRITE_ZEROES, 0, 512, NULL, NULL), NBD_ENOTSUP);
	ck_assert_uint_eq(do_req(&cl, NBD_CMD_FLAG_FAST_ZERO, NBD_CMD_WRITE_ZEROES, 0, 512,
				 NULL, NULL), 0);
	cl_end(&cl);
}
END_TEST

START_TEST(request_validation)
{
	struct client cl;
	struct info in;
	static uint8_t buf[256 * 1024];

	cl_start(&cl, false, NULL);
	cl_go(&cl, "disk", false, false, &in);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 100, 512, NULL, NULL), NBD_EINVAL);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 0, 100, NULL, NULL), NBD_EINVAL);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, VOL_SIZE, 512, NULL, NULL), NBD_EINVAL);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, UINT64_MAX - 511, 1024, NULL, NULL),
			  NBD_EINVAL);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_TRIM, VOL_SIZE - 512, 1024, NULL, NULL),
			  NBD_EINVAL);
	/* Writes past the end: ENOSPC, and the payload is consumed. */
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_WRITE, VOL_SIZE - 512, 1024, buf, NULL),
			  NBD_ENOSPC);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_WRITE_ZEROES, VOL_SIZE, 512, NULL, NULL),
			  NBD_ENOSPC);
	/* Longer than the maximum payload (128k here). */
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 0, 256 * 1024, NULL, NULL), NBD_EINVAL);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_WRITE, 0, 256 * 1024, buf, NULL), NBD_EINVAL);
	/* Unknown commands and flags. */
	ck_assert_uint_eq(do_req(&cl, 0, 99, 0, 512, NULL, NULL), NBD_EINVAL);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_BLOCK_STATUS, 0, 512, NULL, NULL), NBD_EINVAL);
	ck_assert_uint_eq(do_req(&cl, 0x8000, NBD_CMD_READ, 0, 512, NULL, NULL), NBD_EINVAL);
	ck_assert_uint_eq(do_req(&cl, NBD_CMD_FLAG_NO_HOLE, NBD_CMD_WRITE, 0, 512, buf, NULL),
			  NBD_EINVAL);
	/* DF needs structured replies. */
	ck_assert_uint_eq(do_req(&cl, NBD_CMD_FLAG_DF, NBD_CMD_READ, 0, 512, NULL, NULL),
			  NBD_EINVAL);
	/* Zero lengths do nothing and succeed. */
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_WRITE, 0, 0, NULL, NULL), 0);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 0, 0, NULL, NULL), 0);
	/* Still a working connection. */
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 0, 512, NULL, buf), 0);
	cl_end(&cl);
}
END_TEST

START_TEST(read_only_export)
{
	struct client cl;
	struct info in;
	uint8_t buf[512] = { 1 };

	cl_start(&cl, false, NULL);
	cl_go(&cl, "ro", false, false, &in);
	ck_assert(in.flags & NBD_FLAG_READ_ONLY);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_WRITE, 0, 512, buf, NULL), NBD_EPERM);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_TRIM, 0, 512, NULL, NULL), NBD_EPERM);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_WRITE_ZEROES, 0, 512, NULL, NULL), NBD_EPERM);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 0, 512, NULL, buf), 0);
	ck_assert_uint_eq(vol_mem_data(V)[0], 0);
	cl_end(&cl);
}
END_TEST

START_TEST(bad_request_magic_closes)
{
	struct client cl;
	struct info in;
	uint8_t junk[28] = "GET / HTTP/1.1\r\n";

	cl_start(&cl, false, NULL);
	cl_go(&cl, "disk", false, false, &in);
	cl_write(&cl, junk, sizeof(junk));
	cl_expect_closed(&cl, -EPROTO);
}
END_TEST

START_TEST(huge_payload_closes)
{
	struct client cl;
	struct info in;

	cl_start(&cl, false, NULL);
	cl_go(&cl, "disk", false, false, &in);
	req_send(&cl, 0, NBD_CMD_WRITE, 1, 0, 0xfffffe00u, NULL);
	cl_expect_closed(&cl, -EPROTO);
}
END_TEST

START_TEST(hangup_mid_write)
{
	struct client cl;
	struct info in;
	uint8_t part[100] = { 0 };

	cl_start(&cl, false, NULL);
	cl_go(&cl, "disk", false, false, &in);
	req_send(&cl, 0, NBD_CMD_WRITE, 1, 0, 4096, NULL);
	cl_write(&cl, part, sizeof(part));
	shutdown(cl.fd, SHUT_WR);
	cl_expect_closed(&cl, -ECONNRESET);
}
END_TEST

/* A connection drained while a WRITE's payload is received straight into
 * its buffer, when another connection waits for the buffer budget (so a
 * slot put back frees its buffer at once): the buffer must outlive that
 * receive.  Before the fix the drain freed it, and the payload bytes the
 * client had already sent were copied into freed memory (ASan's recv
 * interceptor on epoll; on io_uring the kernel's copy, which the
 * invariant in buf_drop catches in the ASan build). */
START_TEST(drain_mid_direct_payload)
{
	struct client cl;
	struct info in;
	static uint8_t pay[64 * 1024];
	struct membudget *b = membudget_global();

	memset(pay, 0x5a, sizeof(pay));
	cl_start(&cl, false, NULL);
	cl_go(&cl, "disk", false, false, &in);
	req_send(&cl, 0, NBD_CMD_WRITE, 1, 0, sizeof(pay), NULL);
	cl_write(&cl, pay, 100);
	for (int i = 0; i < 5; i++)
		pump();
	ck_assert_msg(cl.c->rx_busy && cl.c->rx_direct, "no receive into the payload's buffer");
	/* Bytes waiting in the socket for that receive (no pump), then the
	 * drain. */
	ck_assert_int_eq(send(cl.fd, pay + 100, 8192, MSG_NOSIGNAL), 8192);
	membudget_wait_begin(b);
	nbd_conn_close(cl.c);
	for (int i = 0; i < 5; i++)
		pump();
	membudget_wait_end(b);
	cl_expect_closed(&cl, -ESHUTDOWN);
}
END_TEST

START_TEST(many_in_flight)
{
	struct client cl;
	struct info in;
	static uint8_t w[512 * 200];
	bool seen[200] = { 0 };
	uint8_t r[512];

	for (unsigned i = 0; i < sizeof(w); i++)
		w[i] = (uint8_t)(i / 512);
	memcpy(vol_mem_data(V), w, sizeof(w));
	cl_start(&cl, false, NULL);
	cl_go(&cl, "disk", false, false, &in);
	/* More than the pool: the server must stop reading, not fail. */
	for (unsigned i = 0; i < 200; i++)
		req_send(&cl, 0, NBD_CMD_READ, 1000 + i, 512ull * i, 512, NULL);
	for (unsigned i = 0; i < 200; i++) {
		uint8_t h[16];
		ck_assert_int_eq(cl_read(&cl, h, 16), 0);
		ck_assert_uint_eq(get32(h), NBD_SIMPLE_REPLY_MAGIC);
		ck_assert_uint_eq(get32(h + 4), 0);
		uint64_t k = get64(h + 8) - 1000;
		ck_assert_uint_lt(k, 200);
		ck_assert(!seen[k]);
		seen[k] = true;
		ck_assert_int_eq(cl_read(&cl, r, 512), 0);
		ck_assert_uint_eq(r[0], (uint8_t)k);
		ck_assert_uint_eq(r[511], (uint8_t)k);
	}
	cl_end(&cl);
}
END_TEST

START_TEST(disc_answers_in_flight_first)
{
	struct client cl;
	struct info in;
	uint8_t w[4096], r[4096];
	uint8_t d[28] = { 0 };

	memset(w, 0x5a, sizeof(w));
	cl_start(&cl, false, NULL);
	cl_go(&cl, "disk", false, false, &in);
	req_send(&cl, 0, NBD_CMD_WRITE, 7, 0, sizeof(w), w);
	req_send(&cl, 0, NBD_CMD_READ, 8, 0, sizeof(r), NULL);
	put32(d, NBD_REQUEST_MAGIC);
	put16(d + 6, NBD_CMD_DISC);
	cl_write(&cl, d, 28);
	ck_assert_uint_eq(simple_reply(&cl, 7, NULL, 0), 0);
	ck_assert_uint_eq(simple_reply(&cl, 8, r, sizeof(r)), 0);
	ck_assert(!memcmp(r, w, sizeof(w)));
	cl_expect_closed(&cl, 0);
}
END_TEST

/* Structured chunk header: returns type; flags, length out. */
static uint16_t chunk(struct client *cl, uint64_t cookie, uint16_t *flags, uint32_t *len)
{
	uint8_t h[20];
	ck_assert_int_eq(cl_read(cl, h, 20), 0);
	ck_assert_uint_eq(get32(h), NBD_STRUCTURED_REPLY_MAGIC);
	ck_assert_uint_eq(get64(h + 8), cookie);
	*flags = get16(h + 4);
	*len = get32(h + 16);
	return get16(h + 6);
}

START_TEST(structured_replies)
{
	struct client cl;
	struct info in;
	uint8_t w[4096], p[8 + 4096];
	uint16_t fl;
	uint32_t len;

	memset(w, 0xa5, sizeof(w));
	cl_start(&cl, false, NULL);
	cl_go(&cl, "disk", true, false, &in);
	ck_assert(in.flags & NBD_FLAG_SEND_DF);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_WRITE, 8192, 4096, w, NULL), 0);
	/* A read: one OFFSET_DATA chunk, final. */
	req_send(&cl, NBD_CMD_FLAG_DF, NBD_CMD_READ, 5, 8192, 4096, NULL);
	ck_assert_uint_eq(chunk(&cl, 5, &fl, &len), NBD_REPLY_TYPE_OFFSET_DATA);
	ck_assert_uint_eq(fl, NBD_REPLY_FLAG_DONE);
	ck_assert_uint_eq(len, 8 + 4096);
	ck_assert_int_eq(cl_read(&cl, p, len), 0);
	ck_assert_uint_eq(get64(p), 8192);
	ck_assert(!memcmp(p + 8, w, 4096));
	/* A refused read: an ERROR chunk with a message, never a simple reply. */
	req_send(&cl, 0, NBD_CMD_READ, 6, 100, 512, NULL);
	ck_assert_uint_eq(chunk(&cl, 6, &fl, &len), NBD_REPLY_TYPE_ERROR);
	ck_assert_uint_eq(fl, NBD_REPLY_FLAG_DONE);
	ck_assert_int_eq(cl_read(&cl, p, len), 0);
	ck_assert_uint_eq(get32(p), NBD_EINVAL);
	ck_assert_uint_eq(get16(p), 0);
	ck_assert_uint_eq(get16(p + 4), len - 6);
	ck_assert_uint_gt(len, 6);
	/* A refused write: structured error too. */
	req_send(&cl, 0, NBD_CMD_WRITE_ZEROES, 9, VOL_SIZE, 512, NULL);
	ck_assert_uint_eq(chunk(&cl, 9, &fl, &len), NBD_REPLY_TYPE_ERROR);
	ck_assert_int_eq(cl_read(&cl, p, len), 0);
	ck_assert_uint_eq(get32(p), NBD_ENOSPC);
	cl_end(&cl);
}
END_TEST

START_TEST(structured_io_error_has_offset)
{
	struct cvol *cv = cvol_new(ALL_CAPS);
	struct nbd_export ce = { .name = "c", .vol = &cv->v };
	struct nbd_export *save = EX[0];
	struct client cl;
	struct info in;
	uint8_t p[128];
	uint16_t fl;
	uint32_t len;

	EX[0] = &ce;
	cl_start(&cl, false, NULL);
	cl_go(&cl, "c", true, false, &in);
	cv->fail_io = true;
	req_send(&cl, 0, NBD_CMD_READ, 3, 4096, 1024, NULL);
	ck_assert_uint_eq(chunk(&cl, 3, &fl, &len), NBD_REPLY_TYPE_ERROR_OFFSET);
	ck_assert_uint_eq(fl, NBD_REPLY_FLAG_DONE);
	ck_assert_int_eq(cl_read(&cl, p, len), 0);
	ck_assert_uint_eq(get32(p), NBD_EIO);
	ck_assert_uint_eq(len, 6 + get16(p + 4) + 8);
	ck_assert_uint_eq(get64(p + len - 8), 4096);
	cv->fail_io = false;
	cl_end(&cl);
	EX[0] = save;
	vol_destroy(&cv->v);
}
END_TEST

/* Extended reply header: returns type. */
static uint16_t ext_chunk(struct client *cl, uint64_t cookie, uint64_t off, uint16_t *flags,
			  uint64_t *len)
{
	uint8_t h[32];
	ck_assert_int_eq(cl_read(cl, h, 32), 0);
	ck_assert_uint_eq(get32(h), NBD_EXTENDED_REPLY_MAGIC);
	ck_assert_uint_eq(get64(h + 8), cookie);
	ck_assert_uint_eq(get64(h + 16), off);
	*flags = get16(h + 4);
	*len = get64(h + 24);
	return get16(h + 6);
}

START_TEST(extended_headers)
{
	struct client cl;
	struct info in;
	uint8_t w[4096], p[8 + 4096];
	uint16_t fl;
	uint64_t len;

	memset(w, 0x3c, sizeof(w));
	cl_start(&cl, false, NULL);
	cl_go(&cl, "disk", false, true, &in);
	/* Every reply is extended, also without data. */
	req_ext(&cl, NBD_CMD_FLAG_PAYLOAD_LEN, NBD_CMD_WRITE, 1, 12288, 4096, w);
	ck_assert_uint_eq(ext_chunk(&cl, 1, 12288, &fl, &len), NBD_REPLY_TYPE_NONE);
	ck_assert_uint_eq(fl, NBD_REPLY_FLAG_DONE);
	ck_assert_uint_eq(len, 0);
	req_ext(&cl, 0, NBD_CMD_READ, 2, 12288, 4096, NULL);
	ck_assert_uint_eq(ext_chunk(&cl, 2, 12288, &fl, &len), NBD_REPLY_TYPE_OFFSET_DATA);
	ck_assert_uint_eq(len, 8 + 4096);
	ck_assert_int_eq(cl_read(&cl, p, len), 0);
	ck_assert_uint_eq(get64(p), 12288);
	ck_assert(!memcmp(p + 8, w, 4096));
	/* A 64-bit effect length: read as such, so past the end. */
	req_ext(&cl, 0, NBD_CMD_WRITE_ZEROES, 3, 0, (1ull << 32) + 512, NULL);
	ck_assert_uint_eq(ext_chunk(&cl, 3, 0, &fl, &len), NBD_REPLY_TYPE_ERROR);
	ck_assert_int_eq(cl_read(&cl, p, len), 0);
	ck_assert_uint_eq(get32(p), NBD_ENOSPC);
	/* A write without PAYLOAD_LEN is refused; a payload on a read is
	 * consumed and refused; the stream stays in step. */
	req_ext(&cl, 0, NBD_CMD_WRITE, 4, 0, 512, NULL);
	ck_assert_uint_eq(ext_chunk(&cl, 4, 0, &fl, &len), NBD_REPLY_TYPE_ERROR);
	ck_assert_int_eq(cl_read(&cl, p, len), 0);
	ck_assert_uint_eq(get32(p), NBD_EINVAL);
	req_ext(&cl, NBD_CMD_FLAG_PAYLOAD_LEN, NBD_CMD_READ, 5, 0, 512, w);
	ck_assert_uint_eq(ext_chunk(&cl, 5, 0, &fl, &len), NBD_REPLY_TYPE_ERROR);
	ck_assert_int_eq(cl_read(&cl, p, len), 0);
	ck_assert_uint_eq(get32(p), NBD_EINVAL);
	req_ext(&cl, 0, NBD_CMD_FLUSH, 6, 0, 0, NULL);
	ck_assert_uint_eq(ext_chunk(&cl, 6, 0, &fl, &len), NBD_REPLY_TYPE_NONE);
	/* A compact header is now a protocol error. */
	req_send(&cl, 0, NBD_CMD_READ, 7, 0, 512, NULL);
	cl_write(&cl, "\0\0\0\0", 4);
	cl_expect_closed(&cl, -EPROTO);
}
END_TEST

START_TEST(kernel_mode)
{
	struct client cl;
	uint8_t w[1024], r[1024];
	uint8_t g[18];

	memset(w, 0x77, sizeof(w));
	cl_start(&cl, true, &E[0]);
	/* No greeting: transmission from the first byte. */
	pump();
	ck_assert_int_eq(recv(cl.fd, g, sizeof(g), MSG_DONTWAIT), -1);
	ck_assert_uint_eq(do_req(&cl, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 1024, 1024, w, NULL), 0);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 1024, 1024, NULL, r), 0);
	ck_assert(!memcmp(r, w, sizeof(w)));
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 100, 512, NULL, NULL), NBD_EINVAL);
	cl_end(&cl);
}
END_TEST

START_TEST(kernel_mode_close_by_owner)
{
	struct client cl;
	cl_start(&cl, true, &E[0]);
	pump();
	nbd_conn_close(cl.c);
	cl_expect_closed(&cl, -ESHUTDOWN);
}
END_TEST

/* ---- flags and multi-connection flush ---- */

START_TEST(flag_derivation)
{
	struct volume v = { .size = 1 << 20, .block_size = 512 };
	struct nbd_export e = { .name = "", .vol = &v };
	uint16_t f;

	v.caps = 0;
	f = nbd_export_flags(&e);
	ck_assert_uint_eq(f, NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_CACHE | NBD_FLAG_CAN_MULTI_CONN);
	v.caps = VOL_CAP_FLUSH;
	ck_assert_uint_eq(nbd_export_flags(&e), f | NBD_FLAG_SEND_FLUSH);
	v.caps = VOL_CAP_FUA;
	ck_assert_uint_eq(nbd_export_flags(&e), f | NBD_FLAG_SEND_FUA);
	v.caps = VOL_CAP_TRIM;
	ck_assert_uint_eq(nbd_export_flags(&e), f | NBD_FLAG_SEND_TRIM);
	v.caps = VOL_CAP_WRITE_ZEROES;
	ck_assert_uint_eq(nbd_export_flags(&e),
			  f | NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_SEND_FAST_ZERO);
	v.caps = ALL_CAPS;
	ck_assert_uint_eq(nbd_export_flags(&e),
			  f | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_TRIM |
				  NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_SEND_FAST_ZERO);
	/* Read-only, by the volume or by the export: no write features, no
	 * multi-conn claim. */
	v.caps = ALL_CAPS | VOL_CAP_READ_ONLY;
	ck_assert_uint_eq(nbd_export_flags(&e),
			  NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_CACHE | NBD_FLAG_READ_ONLY);
	v.caps = ALL_CAPS;
	e.read_only = true;
	ck_assert_uint_eq(nbd_export_flags(&e),
			  NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_CACHE | NBD_FLAG_READ_ONLY);
}
END_TEST

START_TEST(block_size_rules)
{
	struct volume v = { .block_size = 512, .pref_io = 6144, .max_io = 1 << 20 };
	uint32_t min, pref, max;

	nbd_block_sizes(&v, &min, &pref, &max);
	ck_assert_uint_eq(min, 512);
	ck_assert_uint_eq(pref, 4096); /* a power of two */
	ck_assert_uint_eq(max, 1 << 20);
	v.pref_io = 0;
	nbd_block_sizes(&v, &min, &pref, &max);
	ck_assert_uint_eq(pref, 512);
	v.block_size = 4096;
	v.max_io = 1024;
	nbd_block_sizes(&v, &min, &pref, &max);
	ck_assert_uint_eq(min, 4096);
	ck_assert_uint_eq(pref, 4096);
	ck_assert_uint_eq(max, 4096); /* never below the preferred size */
}
END_TEST

START_TEST(multi_conn_flush)
{
	struct cvol *cv = cvol_new(ALL_CAPS);
	struct nbd_export ce = { .name = "c", .vol = &cv->v };
	struct nbd_export *save = EX[0];
	struct client a, b;
	struct info in;
	uint8_t w[4096];

	memset(w, 0xee, sizeof(w));
	EX[0] = &ce;
	cl_start(&a, false, NULL);
	cl_go(&a, "c", false, false, &in);
	ck_assert(in.flags & NBD_FLAG_CAN_MULTI_CONN);
	cl_start(&b, false, NULL);
	cl_go(&b, "c", true, false, &in);
	/* A's write is acknowledged but still only in the volatile cache. */
	ck_assert_uint_eq(do_req(&a, 0, NBD_CMD_WRITE, 65536, sizeof(w), w, NULL), 0);
	ck_assert(!memcmp(cv->cache + 65536, w, sizeof(w)));
	ck_assert_uint_eq(cv->durable[65536], 0);
	ck_assert_uint_eq(cv->flushes, 0);
	/* FLUSH on B: answered only once A's write is durable. */
	ck_assert_uint_eq(do_req(&b, 0, NBD_CMD_FLUSH, 0, 0, NULL, NULL), 0);
	ck_assert_uint_eq(cv->flushes, 1);
	ck_assert(!memcmp(cv->durable + 65536, w, sizeof(w)));
	/* FUA on B is durable at its reply, with no flush. */
	memset(w, 0x11, sizeof(w));
	ck_assert_uint_eq(do_req(&b, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 0, sizeof(w), w, NULL), 0);
	ck_assert(!memcmp(cv->durable, w, sizeof(w)));
	ck_assert_uint_eq(cv->flushes, 1);
	cl_end(&a);
	cl_end(&b);
	EX[0] = save;
	vol_destroy(&cv->v);
}
END_TEST

/* ---- the server on a Unix socket ---- */

static int stopped;
static void on_stopped(void *arg) { *(int *)arg = 1; }

START_TEST(server_unix_socket)
{
	char dir[] = "/tmp/nbd-test-XXXXXX", path[128];
	struct gw_listen l;
	struct reactor *rs[1] = { &R };
	struct nbd_server_opts o = { .listen = &l, .exports = EX, .nr_exports = 2,
				     .reactors = rs, .nr_reactors = 1 };
	struct nbd_server *srv;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct client cl;
	struct info in;
	uint8_t r[512];
	struct stat st;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "unix:%s/s.sock", dir);
	ck_assert_int_eq(gw_listen_parse(path, &l), 0);
	ck_assert_int_eq(nbd_server_start(&o, &srv), 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", l.path);
	/* A second server on the same live socket is refused. */
	struct nbd_server *srv2;
	ck_assert_int_eq(nbd_server_start(&o, &srv2), -EADDRINUSE);

	memset(&cl, 0, sizeof(cl));
	cl.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(cl.fd, (struct sockaddr *)&a, sizeof(a)), 0);
	fcntl(cl.fd, F_SETFL, O_NONBLOCK);
	cl_go(&cl, "ro", false, false, &in);
	ck_assert(in.flags & NBD_FLAG_READ_ONLY);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 0, 512, NULL, r), 0);

	/* Stop with the client connected: it is closed, then done runs. */
	stopped = 0;
	nbd_server_stop(srv, on_stopped, &stopped);
	uint8_t junk[64];
	while (cl_read(&cl, junk, 1) == 0)
		;
	uint64_t end = reactor_now_ns() + GUARD_NS;
	while (!stopped && reactor_now_ns() < end)
		pump();
	ck_assert_int_eq(stopped, 1);
	ck_assert_int_eq(stat(l.path, &st), -1);
	close(cl.fd);
	gw_listen_free(&l);
	rmdir(dir);
}
END_TEST

static struct reactor R2;
static struct reactor_msg stop_msg;

static void r2_stop(struct reactor_msg *m)
{
	(void)m;
	reactor_stop(&R2);
}

static int unix_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/* Two reactors: the second connection lives on the other thread, and a
 * FLUSH there covers a write acknowledged on the first. */
START_TEST(two_reactors_multi_conn)
{
	char dir[] = "/tmp/nbd-test-XXXXXX", spec[128];
	struct cvol *cv = cvol_new(ALL_CAPS);
	struct nbd_export ce = { .name = "c", .vol = &cv->v };
	struct nbd_export *ex[1] = { &ce };
	struct gw_listen l;
	struct reactor *rs[2] = { &R, &R2 };
	struct nbd_server_opts o = { .listen = &l, .exports = ex, .nr_exports = 1,
				     .reactors = rs, .nr_reactors = 2 };
	struct nbd_server *srv;
	struct client a, b;
	struct info in;
	uint8_t w[4096];

	ck_assert_int_eq(reactor_init(&R2, 1, 256), 0);
	ck_assert_int_eq(reactor_start_thread(&R2), 0);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(spec, sizeof(spec), "unix:%s/s.sock", dir);
	ck_assert_int_eq(gw_listen_parse(spec, &l), 0);
	ck_assert_int_eq(nbd_server_start(&o, &srv), 0);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.fd = unix_connect(l.path);
	cl_go(&a, "c", false, false, &in);
	b.fd = unix_connect(l.path);
	cl_go(&b, "c", true, false, &in);

	memset(w, 0x42, sizeof(w));
	ck_assert_uint_eq(do_req(&a, 0, NBD_CMD_WRITE, 8192, sizeof(w), w, NULL), 0);
	ck_assert_uint_eq(cv->durable[8192], 0);
	ck_assert_uint_eq(do_req(&b, 0, NBD_CMD_FLUSH, 0, 0, NULL, NULL), 0);
	ck_assert(!memcmp(cv->durable + 8192, w, sizeof(w)));
	ck_assert_uint_eq(cv->flushes, 1);
	/* And B's data reads back on A. */
	memset(w, 0x43, sizeof(w));
	ck_assert_uint_eq(do_req(&b, 0, NBD_CMD_WRITE, 0, sizeof(w), w, NULL), 0);
	uint8_t r[4096];
	ck_assert_uint_eq(do_req(&a, 0, NBD_CMD_READ, 0, sizeof(r), NULL, r), 0);
	ck_assert(!memcmp(r, w, sizeof(w)));

	stopped = 0;
	nbd_server_stop(srv, on_stopped, &stopped);
	uint8_t junk[64];
	while (cl_read(&a, junk, 1) == 0)
		;
	while (cl_read(&b, junk, 1) == 0)
		;
	uint64_t end = reactor_now_ns() + GUARD_NS;
	while (!stopped && reactor_now_ns() < end)
		pump();
	ck_assert_int_eq(stopped, 1);
	close(a.fd);
	close(b.fd);
	stop_msg.fn = r2_stop;
	reactor_send_msg(&R2, &stop_msg);
	reactor_join(&R2);
	reactor_fini(&R2);
	gw_listen_free(&l);
	rmdir(dir);
	vol_destroy(&cv->v);
}
END_TEST

START_TEST(block_size_4k)
{
	struct client cl;
	struct info in;

	cl_start(&cl, false, NULL);
	cl_go(&cl, "disk", false, false, &in);
	ck_assert_uint_eq(in.min, 4096);
	ck_assert_uint_eq(in.pref, 4096);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 512, 4096, NULL, NULL), NBD_EINVAL);
	ck_assert_uint_eq(do_req(&cl, 0, NBD_CMD_READ, 0, 512, NULL, NULL), NBD_EINVAL);
	cl_end(&cl);
}
END_TEST

static void setup_4k(void) { setup_caps(ALL_CAPS, 4096); }

static Suite *suite(void)
{
	Suite *s = suite_create("nbd");
	TCase *t = tcase_create("handshake");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, greeting_and_abort);
	tcase_add_test(t, unknown_client_flags_close);
	tcase_add_test(t, bad_option_magic_closes);
	tcase_add_test(t, option_count_capped);
	tcase_add_test(t, option_length_capped);
	tcase_add_test(t, export_name_long_closes);
	tcase_add_test(t, unsupported_options);
	tcase_add_test(t, list_exports);
	tcase_add_test(t, info_malformed);
	tcase_add_test(t, info_contents);
	tcase_add_test(t, export_name_paths);
	tcase_add_test(t, structured_and_extended_options);
	tcase_add_test(t, client_hangup_in_handshake);
	suite_add_tcase(s, t);

	t = tcase_create("transmission");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, simple_write_read);
	tcase_add_test(t, request_validation);
	tcase_add_test(t, read_only_export);
	tcase_add_test(t, bad_request_magic_closes);
	tcase_add_test(t, huge_payload_closes);
	tcase_add_test(t, hangup_mid_write);
	tcase_add_test(t, drain_mid_direct_payload);
	tcase_add_test(t, many_in_flight);
	tcase_add_test(t, disc_answers_in_flight_first);
	tcase_add_test(t, structured_replies);
	tcase_add_test(t, structured_io_error_has_offset);
	tcase_add_test(t, extended_headers);
	tcase_add_test(t, kernel_mode);
	tcase_add_test(t, kernel_mode_close_by_owner);
	tcase_add_test(t, flag_derivation);
	tcase_add_test(t, block_size_rules);
	tcase_add_test(t, multi_conn_flush);
	tcase_add_test(t, server_unix_socket);
	tcase_add_test(t, two_reactors_multi_conn);
	tcase_add_test(t, budget_spent_waits_kernel_served);
	suite_add_tcase(s, t);

	t = tcase_create("block4k");
	tcase_add_checked_fixture(t, setup_4k, teardown);
	tcase_add_test(t, block_size_4k);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	static const char *const backends[] = { "io_uring", "epoll" };
	int failed = 0;

	unit_need_io_uring();
	/* Every case on both reactor backends: they receive differently (a
	 * ring's receive is armed in the kernel, epoll's runs at readiness). */
	for (unsigned i = 0; i < 2; i++) {
		setenv(REACTOR_BACKEND_ENV, backends[i], 1);
		printf("backend %s\n", backends[i]);
		SRunner *sr = srunner_create(suite());
		srunner_run_all(sr, CK_NORMAL);
		failed += srunner_ntests_failed(sr);
		srunner_free(sr);
	}
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
