/* The NBD side of the pipes (nbd/splice.c) driven over socketpairs from
 * this thread, as test_nbd.c drives the server: READ replies spliced out of
 * a pipe, WRITE payloads spliced from the client's socket into one, a
 * client that hangs up in the middle of such a payload, and a large request
 * right behind a spliced write (the rx_hdr_only rule).
 *
 * SIGPIPE is ignored (the connection uses pipes only then) and
 * NVMF_GATEWAY_SPLICE_WRITES=all is set before anything runs (the mode is
 * cached), so socket clients splice their writes too.  Every test runs on
 * both reactor backends. */
#include <check.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/base/iov.h"
#include "gateway/base/log.h"
#include "gateway/base/membudget.h"
#include "gateway/base/pipe_sink.h"
#include "gateway/base/reactor.h"
#include "gateway/volume/volume.h"
#include "nbd/internal.h"
#include "nbd/nbd.h"
#include "nbd/proto.h"
#include "unit_netns.h"
#include "unit_skip.h"

#define VOL_SIZE (4u << 20)
#define BIG (128u * 1024)

/* ---- a RAM volume that fills a READ's pipe and sends a WRITE from its
 * pipe (as the NVMe/TCP transport does), leaving the payload there ---- */

struct svol {
	struct volume v;
	uint8_t *data;
	unsigned reads_spliced, writes_from_pipe;
};

static void svol_submit(struct volume *v, struct vol_io *io)
{
	struct svol *sv = container_of(v, struct svol, v);
	uint8_t *p = sv->data + io->offset;
	int err = 0;

	switch (io->op) {
	case VOL_READ:
		if (io->sink && pipe_sink_put(io->sink, p, io->length) == 0) {
			sv->reads_spliced++;
			break;
		}
		if (io->sink && pipe_sink_unsplice(io->sink, io->iov, io->iovcnt) < 0) {
			err = -EIO;
			break;
		}
		iov_copy_to(io->iov, io->iovcnt, 0, p, io->length);
		break;
	case VOL_WRITE:
		if (io->sink && io->sink->filled == io->length) {
			/* Copy it out of a duplicate: the pipe keeps it. */
			struct pipe_sink dup;
			struct iovec iov = { p, io->length };
			ck_assert_int_eq(pipe_sink_open(&dup, 1u << 20), 0);
			ck_assert_int_eq(pipe_sink_tee(&dup, io->sink), 0);
			ck_assert_uint_eq(dup.filled, io->length);
			ck_assert_int_eq(pipe_sink_unsplice(&dup, &iov, 1), 0);
			pipe_sink_close(&dup);
			sv->writes_from_pipe++;
			break;
		}
		iov_copy_from(io->iov, io->iovcnt, 0, p, io->length);
		break;
	case VOL_WRITE_ZEROES:
	case VOL_TRIM:
		memset(p, 0, io->length);
		break;
	case VOL_FLUSH:
		break;
	}
	vol_complete(io->origin, io, err);
}

static void svol_destroy(struct volume *v)
{
	struct svol *sv = container_of(v, struct svol, v);
	free(sv->data);
	free(v->stats);
	free(sv);
}

static const struct vol_ops svol_ops = {
	.name = "splice-test",
	.submit = svol_submit,
	.destroy = svol_destroy,
	.pipe_writes = true,
};

static struct svol *svol_new(void)
{
	struct svol *sv = calloc(1, sizeof(*sv));
	ck_assert_ptr_nonnull(sv);
	sv->data = calloc(1, VOL_SIZE);
	ck_assert_ptr_nonnull(sv->data);
	sv->v.stats = calloc(1, sizeof(*sv->v.stats));
	sv->v.nr_stats = 1;
	snprintf(sv->v.name, sizeof(sv->v.name), "svol");
	sv->v.ops = &svol_ops;
	sv->v.size = VOL_SIZE;
	sv->v.block_size = 512;
	sv->v.pref_io = 4096;
	sv->v.max_io = 1u << 20;
	sv->v.caps = VOL_CAP_FLUSH | VOL_CAP_FUA;
	return sv;
}

/* ---- the test client (as in test_nbd.c) ---- */

struct client {
	int fd;
	struct nbd_conn *c;
	int closed;
	int err;
};

static struct reactor R;
static struct svol *SV;
static struct volume *MEM;
static struct nbd_export E[2];
static struct nbd_export *EX[2];

static void setup(void)
{
	log_set_level(LOG_LVL_ERR);
	ck_assert_int_eq(reactor_init(&R, 0, 256), 0);
	SV = svol_new();
	ck_assert_int_eq(vol_mem_create("mem", VOL_SIZE, 512, VOL_CAP_FLUSH, 1, &MEM), 0);
	MEM->max_io = 1u << 20;
	E[0] = (struct nbd_export){ .name = "pipe", .vol = &SV->v };
	E[1] = (struct nbd_export){ .name = "mem", .vol = MEM };
	EX[0] = &E[0];
	EX[1] = &E[1];
}

static void teardown(void)
{
	for (int i = 0; i < 20; i++)
		reactor_poll(&R, 1000000);
	vol_destroy(&SV->v);
	vol_destroy(MEM);
	reactor_fini(&R);
}

static void on_closed(void *arg, int err)
{
	struct client *cl = arg;
	cl->closed++;
	cl->err = err;
	cl->c = NULL;
}

static void pump(void) { reactor_poll(&R, 2 * NSEC_PER_MSEC); }

/* A hang guard, not a timing assertion. */
#define GUARD_NS (5 * NSEC_PER_SEC)

/* Waits (pumping, bounded) until cond holds. */
#define WAIT_FOR(cond)                                                               \
	do {                                                                         \
		uint64_t end_ = reactor_now_ns() + GUARD_NS;                         \
		while (!(cond)) {                                                    \
			ck_assert_msg(reactor_now_ns() < end_, "never: %s", #cond);  \
			pump();                                                      \
		}                                                                    \
	} while (0)

static unsigned open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* A connected TCP pair, the server on `to`, the client bound to `from`
 * (any if NULL): sv[0] the client's end, sv[1] the server's. */
static void tcp_pair(int sv[2], const char *to, const char *from)
{
	struct sockaddr_in a = { .sin_family = AF_INET }, b = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(inet_pton(AF_INET, to, &a.sin_addr), 1);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, len), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &len), 0);
	sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(sv[0], 0);
	if (from) {
		ck_assert_int_eq(inet_pton(AF_INET, from, &b.sin_addr), 1);
		ck_assert_int_eq(bind(sv[0], (struct sockaddr *)&b, sizeof(b)), 0);
	}
	ck_assert_int_eq(connect(sv[0], (struct sockaddr *)&a, len), 0);
	sv[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(sv[1], 0);
	close(l);
}

/* A client over a Unix socketpair (tcp_to NULL) or over TCP to tcp_to
 * from tcp_from (any if NULL). */
static void cl_start_on(struct client *cl, const char *tcp_to, const char *tcp_from)
{
	int sv[2], big = 4 << 20;

	memset(cl, 0, sizeof(*cl));
	if (tcp_to)
		tcp_pair(sv, tcp_to, tcp_from);
	else
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	/* Room for a write and the request behind it in one send. */
	if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
		setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	cl->fd = sv[0];
	ck_assert_int_eq(nbd_conn_start_newstyle(&R, EX, 2, sv[1], "test", on_closed, cl, &cl->c),
			 0);
}

static void cl_start(struct client *cl)
{
	cl_start_on(cl, NULL, NULL);
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

static void cl_expect_closed(struct client *cl, int err)
{
	uint8_t junk[4096];

	while (cl_read(cl, junk, 1) == 0)
		;
	WAIT_FOR(cl->closed);
	ck_assert_int_eq(cl->closed, 1);
	ck_assert_int_eq(cl->err, err);
	close(cl->fd);
}

static void put16(uint8_t *p, uint16_t v) { v = htobe16(v); memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }

static void cl_end(struct client *cl)
{
	uint8_t d[28] = { 0 };
	put32(d, NBD_REQUEST_MAGIC);
	put16(d + 6, NBD_CMD_DISC);
	cl_write(cl, d, sizeof(d));
	cl_expect_closed(cl, 0);
}

/* Handshake: NBD_OPT_GO on name, simple replies. */
static void cl_go(struct client *cl, const char *name)
{
	uint8_t g[18], f[4], h[20], d[64], buf[512];
	uint32_t nl = (uint32_t)strlen(name), type;

	ck_assert_int_eq(cl_read(cl, g, sizeof(g)), 0);
	ck_assert_uint_eq(get64(g), NBD_MAGIC);
	put32(f, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	cl_write(cl, f, 4);
	put32(d, nl);
	memcpy(d + 4, name, nl);
	put16(d + 4 + nl, 0);
	put64(h, NBD_IHAVEOPT);
	put32(h + 8, NBD_OPT_GO);
	put32(h + 12, 6 + nl);
	cl_write(cl, h, 16);
	cl_write(cl, d, 6 + nl);
	do {
		ck_assert_int_eq(cl_read(cl, h, 20), 0);
		ck_assert_uint_eq(get64(h), NBD_OPT_REPLY_MAGIC);
		uint32_t l = get32(h + 16);
		ck_assert_uint_le(l, sizeof(buf));
		if (l)
			ck_assert_int_eq(cl_read(cl, buf, l), 0);
		type = get32(h + 12);
	} while (type == NBD_REP_INFO);
	ck_assert_uint_eq(type, NBD_REP_ACK);
	ck_assert_ptr_nonnull(cl->c);
	ck_assert_int_eq(cl->c->state, NBD_CONN_TRANSMISSION);
}

static void req_hdr(uint8_t *h, uint16_t type, uint64_t cookie, uint64_t off, uint32_t len)
{
	put32(h, NBD_REQUEST_MAGIC);
	put16(h + 4, 0);
	put16(h + 6, type);
	put64(h + 8, cookie);
	put64(h + 16, off);
	put32(h + 24, len);
}

/* A simple reply for cookie: its error, then data_len bytes if 0. */
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

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);

	/* xorshift: no run of one pattern matches another pattern's bytes. */
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)(x >> 32);
	}
}

/* READs BIG bytes at off (cookie) and checks that they are w. */
static void read_back(struct client *cl, uint64_t cookie, uint64_t off, const uint8_t *w)
{
	static uint8_t r[BIG];
	uint8_t h[28];

	req_hdr(h, NBD_CMD_READ, cookie, off, BIG);
	cl_write(cl, h, 28);
	ck_assert_uint_eq(simple_reply(cl, cookie, r, BIG), 0);
	ck_assert(!memcmp(r, w, BIG));
}

/* ---- 1. a 128K READ reply goes out of a pipe ---- */

/* Three 128K reads at 65536, cookies from cookie0, each answered with want. */
static void three_reads(struct client *cl, const uint8_t *want, uint64_t cookie0)
{
	static uint8_t r[BIG];
	uint8_t h[28];

	for (unsigned i = 0; i < 3; i++) {
		memset(r, 0, sizeof(r));
		req_hdr(h, NBD_CMD_READ, cookie0 + i, 65536, BIG);
		cl_write(cl, h, 28);
		ck_assert_uint_eq(simple_reply(cl, cookie0 + i, r, BIG), 0);
		ck_assert(!memcmp(r, want, BIG));
	}
}

START_TEST(read_128k_spliced)
{
	struct client cl;
	static uint8_t r[BIG], want[BIG];
	uint8_t h[28];

	fill(want, BIG, 5);
	memcpy(SV->data + 65536, want, BIG);
	cl_start(&cl);
	cl_go(&cl, "pipe");
	three_reads(&cl, want, 10);
	ck_assert_uint_eq(SV->reads_spliced, 3);
	ck_assert_uint_eq(cl.c->nr_spliced, 3);
	ck_assert_uint_eq(cl.c->nr_splice_missed, 0);
	/* Below NBD_SPLICE_MIN: from the buffer. */
	req_hdr(h, NBD_CMD_READ, 20, 65536, 4096);
	cl_write(&cl, h, 28);
	ck_assert_uint_eq(simple_reply(&cl, 20, r, 4096), 0);
	ck_assert(!memcmp(r, want, 4096));
	ck_assert_uint_eq(cl.c->nr_spliced, 3);
	/* One pipe did it all, and it is back in the pool. */
	ck_assert_uint_eq(cl.c->nr_pipe_free, 1);
	cl_end(&cl);
}
END_TEST

/* Three 128K reads by a TCP client from `from` to `to`: answered right,
 * and out of a pipe as many times as want_spliced says. */
static void tcp_reads(const char *to, const char *from, unsigned want_spliced)
{
	struct client cl;
	static uint8_t want[BIG];

	fill(want, BIG, 7);
	memcpy(SV->data + 65536, want, BIG);
	cl_start_on(&cl, to, from);
	cl_go(&cl, "pipe");
	three_reads(&cl, want, 30);
	ck_assert_uint_eq(cl.c->nr_spliced, want_spliced);
	ck_assert_uint_eq(SV->reads_spliced, want_spliced);
	cl_end(&cl);
}

/* A client on this host over TCP gets its replies from memory, unless
 * NVMF_GATEWAY_SPLICE_READS=all asks for pipes (on loopback the client
 * takes in the gateway's own buffers, and a spliced reply cost the machine
 * more: nbd/splice.c).  The mode is read once per process: main() forks
 * every case (and clears the variable), so each case reads it afresh. */
START_TEST(read_tcp_local_from_memory)
{
	tcp_reads("127.0.0.1", NULL, 0);
}
END_TEST

START_TEST(read_tcp_local_spliced_when_asked)
{
	setenv("NVMF_GATEWAY_SPLICE_READS", "all", 1);
	tcp_reads("127.0.0.1", NULL, 3);
}
END_TEST

/* A TCP client that is not local by the rule (another address than the
 * one it dialled, in a network namespace of the test's own: no other host
 * is reachable) gets its replies out of pipes, as a remote client does. */
START_TEST(read_tcp_remote_spliced)
{
	ck_assert_msg(unit_netns_enter(), "a network namespace: %s", strerror(errno));
	ck_assert_msg(unit_netns_add_v4("10.200.0.1") && unit_netns_add_v4("10.200.0.2"),
		      "addresses on lo: %s", strerror(errno));
	tcp_reads("10.200.0.1", "10.200.0.2", 3);
}
END_TEST

/* ---- 2. a 128K WRITE payload in pieces, with pauses ---- */

/* Sends the payload in pieces, waiting after each for the server to have
 * taken it all and to be polling the socket for the rest. */
static void write_in_pieces(struct client *cl, uint64_t cookie, uint64_t off, const uint8_t *w)
{
	static const size_t cuts[] = { 1000, 4096, 50000, 100000, BIG };
	uint8_t h[28];
	size_t sent = 0;

	req_hdr(h, NBD_CMD_WRITE, cookie, off, BIG);
	cl_write(cl, h, 28);
	for (unsigned i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		cl_write(cl, w + sent, cuts[i] - sent);
		sent = cuts[i];
		if (sent == BIG)
			break;
		WAIT_FOR(cl->c->cur && cl->c->cur_got == sent && cl->c->rx_poll);
		/* It is in the pipe, not in the buffer. */
		ck_assert_ptr_nonnull(cl->c->cur->sink);
		ck_assert_uint_eq(cl->c->cur->sink->filled, sent);
	}
	ck_assert_uint_eq(simple_reply(cl, cookie, NULL, 0), 0);
}

START_TEST(write_128k_in_pieces_spliced)
{
	struct client cl;
	static uint8_t w[BIG];

	fill(w, BIG, 9);
	cl_start(&cl);
	cl_go(&cl, "pipe");
	write_in_pieces(&cl, 1, 8192, w);
	ck_assert(!memcmp(SV->data + 8192, w, BIG));
	/* The volume sent it from the pipe: it stayed there. */
	ck_assert_uint_eq(SV->writes_from_pipe, 1);
	ck_assert_uint_eq(cl.c->nr_wr_spliced, 1);
	ck_assert_uint_eq(cl.c->nr_wr_taken_out, 0);
	ck_assert_uint_eq(cl.c->nr_wr_unspliced, 0);
	ck_assert_uint_ge(cl.c->nr_wr_polls, 4);
	read_back(&cl, 2, 8192, w);
	ck_assert_uint_eq(cl.c->nr_spliced, 1);
	cl_end(&cl);
}
END_TEST

/* The RAM volume cannot send from a pipe: vol_submit takes it out. */
START_TEST(write_128k_in_pieces_taken_out)
{
	struct client cl;
	static uint8_t w[BIG];

	fill(w, BIG, 11);
	cl_start(&cl);
	cl_go(&cl, "mem");
	write_in_pieces(&cl, 1, 4096, w);
	ck_assert(!memcmp(vol_mem_data(MEM) + 4096, w, BIG));
	ck_assert_uint_eq(cl.c->nr_wr_taken_out, 1);
	ck_assert_uint_eq(cl.c->nr_wr_spliced, 0);
	ck_assert_uint_eq(cl.c->nr_wr_unspliced, 0);
	read_back(&cl, 2, 4096, w);
	cl_end(&cl);
}
END_TEST

/* A payload that comes in many small sends fills its pipe's slots (one
 * per send here) long before its bytes: the connection gives up on the
 * pipe, takes what the pipe holds back into the buffer and receives the
 * rest there.  Only the bytes that reach the volume show that what was in
 * the pipe came back whole and in order. */
START_TEST(write_fills_its_pipe)
{
	struct client cl;
	static uint8_t w[BIG];
	const size_t piece = 64;
	size_t sent = 0;
	uint8_t h[28];

	fill(w, BIG, 13);
	cl_start(&cl);
	cl_go(&cl, "pipe");
	req_hdr(h, NBD_CMD_WRITE, 1, 16384, BIG);
	cl_write(&cl, h, 28);
	while (sent < BIG && !cl.c->nr_wr_unspliced) {
		cl_write(&cl, w + sent, piece);
		sent += piece;
		if (sent < BIG)
			WAIT_FOR(cl.c->nr_wr_unspliced ||
				 (cl.c->cur && cl.c->cur_got == sent && cl.c->rx_poll));
	}
	/* A pipe of up to 2 MiB has at most 512 slots, so it gave up early. */
	ck_assert_uint_eq(cl.c->nr_wr_unspliced, 1);
	ck_assert_uint_lt(sent, BIG);
	cl_write(&cl, w + sent, BIG - sent);
	ck_assert_uint_eq(simple_reply(&cl, 1, NULL, 0), 0);
	ck_assert(!memcmp(SV->data + 16384, w, BIG));
	ck_assert_uint_eq(SV->writes_from_pipe, 0);
	ck_assert_uint_eq(cl.c->nr_wr_spliced, 0);
	read_back(&cl, 2, 16384, w);
	cl_end(&cl);
}
END_TEST

/* ---- 3. the client hangs up in the middle of a spliced payload ---- */

static void hangup_mid_payload(bool close_all)
{
	struct client cl;
	static uint8_t w[BIG];
	uint8_t h[28];
	struct membudget *b = membudget_global();
	struct pipe_sink warm;

	/* pipe_sink.c keeps a /dev/null open from its first discard on. */
	ck_assert_int_eq(pipe_sink_open(&warm, 65536), 0);
	ck_assert_int_eq(pipe_sink_put(&warm, "x", 1), 0);
	ck_assert_int_eq(pipe_sink_empty(&warm), 0);
	pipe_sink_close(&warm);
	unsigned fds0 = open_fds();
	uint64_t used0 = membudget_used(b);

	fill(w, BIG, 3);
	memset(SV->data, 0xee, BIG);
	cl_start(&cl);
	cl_go(&cl, "pipe");
	req_hdr(h, NBD_CMD_WRITE, 1, 0, BIG);
	cl_write(&cl, h, 28);
	cl_write(&cl, w, 60000);
	WAIT_FOR(cl.c->cur && cl.c->cur_got == 60000 && cl.c->rx_poll);
	ck_assert_uint_eq(cl.c->cur->sink->filled, 60000);
	ck_assert_uint_eq(open_fds(), fds0 + 2 + 2); /* the socketpair and a pipe */
	if (close_all) {
		close(cl.fd);
		WAIT_FOR(cl.closed);
		ck_assert_int_eq(cl.err, -ECONNRESET);
	} else {
		shutdown(cl.fd, SHUT_WR);
		cl_expect_closed(&cl, -ECONNRESET);
	}
	ck_assert_int_eq(cl.closed, 1);
	for (int i = 0; i < 5; i++)
		pump();
	/* Nothing was written, and everything is back. */
	ck_assert_uint_eq(SV->data[0], 0xee);
	ck_assert_uint_eq(SV->data[BIG - 1], 0xee);
	ck_assert_uint_eq(open_fds(), fds0);
	ck_assert_uint_eq(membudget_used(b), used0);
}

START_TEST(hangup_mid_spliced_write)
{
	hangup_mid_payload(false);
}
END_TEST

START_TEST(close_mid_spliced_write)
{
	hangup_mid_payload(true);
}
END_TEST

/* ---- 4. a large request right behind a spliced write, in one send ---- */

static void back_to_back(uint16_t second)
{
	struct client cl;
	static uint8_t buf[28 + BIG + 28 + BIG], w[BIG], w2[BIG], r[BIG];
	size_t n = 0;

	fill(w, BIG, 21);
	fill(w2, BIG, 77);
	memcpy(SV->data + BIG, w2, BIG); /* what the READ gets */
	cl_start(&cl);
	cl_go(&cl, "pipe");
	req_hdr(buf, NBD_CMD_WRITE, 1, 0, BIG);
	memcpy(buf + 28, w, BIG);
	n = 28 + BIG;
	req_hdr(buf + n, second, 2, BIG, BIG);
	n += 28;
	if (second == NBD_CMD_WRITE) {
		memcpy(buf + n, w2, BIG);
		memset(SV->data + BIG, 0, BIG);
		n += BIG;
	}
	ck_assert_int_eq(send(cl.fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
	ck_assert_uint_eq(simple_reply(&cl, 1, NULL, 0), 0);
	if (second == NBD_CMD_READ) {
		ck_assert_uint_eq(simple_reply(&cl, 2, r, BIG), 0);
		ck_assert(!memcmp(r, w2, BIG));
	} else {
		ck_assert_uint_eq(simple_reply(&cl, 2, NULL, 0), 0);
	}
	ck_assert(!memcmp(SV->data, w, BIG));
	ck_assert(!memcmp(SV->data + BIG, w2, BIG));
	ck_assert_uint_eq(cl.c->nr_wr_spliced, second == NBD_CMD_WRITE ? 2 : 1);
	ck_assert_uint_eq(cl.c->nr_wr_unspliced, 0);
	ck_assert_uint_eq(cl.c->nr_spliced, second == NBD_CMD_READ ? 1 : 0);
	/* The header behind the first payload was received alone (the
	 * rx_hdr_only rule): no byte of the second payload went through rx.
	 * (The first one's head did: it came with its header.) */
	if (second == NBD_CMD_WRITE)
		ck_assert_ptr_null(memmem(cl.c->rx, NBD_RXBUF_SIZE, w2, 256));
	ck_assert_ptr_nonnull(memmem(cl.c->rx, NBD_RXBUF_SIZE, w + 4096, 256));
	cl_end(&cl);
}

START_TEST(write_then_read_one_send)
{
	back_to_back(NBD_CMD_READ);
}
END_TEST

START_TEST(write_then_write_one_send)
{
	back_to_back(NBD_CMD_WRITE);
}
END_TEST

/* Whether read_tcp_remote_spliced can run here (unit_netns_possible). */
static bool netns_ok;

static Suite *suite(const char *backend)
{
	Suite *s = suite_create(backend);
	TCase *t = tcase_create("splice");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, read_128k_spliced);
	tcase_add_test(t, read_tcp_local_from_memory);
	tcase_add_test(t, read_tcp_local_spliced_when_asked);
	if (netns_ok)
		tcase_add_test(t, read_tcp_remote_spliced);
	tcase_add_test(t, write_128k_in_pieces_spliced);
	tcase_add_test(t, write_128k_in_pieces_taken_out);
	tcase_add_test(t, write_fills_its_pipe);
	tcase_add_test(t, hangup_mid_spliced_write);
	tcase_add_test(t, close_mid_spliced_write);
	tcase_add_test(t, write_then_read_one_send);
	tcase_add_test(t, write_then_write_one_send);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	static const char *const backends[] = { "io_uring", "epoll" };
	int failed = 0;

	unit_need_io_uring();
	signal(SIGPIPE, SIG_IGN);
	setenv("NVMF_GATEWAY_SPLICE_WRITES", "all", 1);
	unsetenv("NVMF_GATEWAY_NO_SPLICE");
	unsetenv("NVMF_GATEWAY_SPLICE_READS");
	netns_ok = unit_netns_possible();
	if (!netns_ok)
		printf("SKIP nbd_splice/read_tcp_remote_spliced: no network namespace of our own here "
		       "(needs root or user namespaces)\n");
	for (unsigned i = 0; i < 2; i++) {
		setenv(REACTOR_BACKEND_ENV, backends[i], 1);
		SRunner *sr = srunner_create(suite(backends[i]));
		/* The cases set environment variables read once per process. */
		srunner_set_fork_status(sr, CK_FORK);
		srunner_run_all(sr, CK_NORMAL);
		failed += srunner_ntests_failed(sr);
		srunner_free(sr);
	}
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
