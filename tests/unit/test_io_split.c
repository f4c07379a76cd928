/* MDTS splitting and single completion of block I/O (transports/io.c),
 * driven through nvmf_io_submit with a fake transport that records every
 * command and completes it when the test says so: in order, out of order,
 * inside submit, with an error, or by losing the connection. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/base/iov.h"
#include "transports/io.h"
#include "transports/transport.h"
#include "unit_skip.h"

#define MAX_CMDS 4096

struct cmd_rec {
	uint8_t opcode;
	uint64_t slba;
	uint32_t nlb; /* 1-based */
	uint32_t cdw11, cdw12;
	uint32_t data_len;
	unsigned iovcnt;
	bool host_to_ctrl;
	struct pipe_sink *sink;
	uint32_t sink_off;
	struct iovec iov[NVMF_REQ_MAX_IOV];
	struct nvme_dsm_range dsm;
};

static struct reactor r;
static struct nvmf_queue q;
static struct nvmf_ns ns;
static struct cmd_rec cmds[MAX_CMDS];
static unsigned ncmds;
static struct nvmf_req *pending[MAX_CMDS];
static unsigned npending;
static bool complete_in_submit;
static unsigned cb_count;
static int cb_err;

static int fake_submit(struct nvmf_queue *fq, struct nvmf_req *req)
{
	struct cmd_rec *c = &cmds[ncmds++];

	(void)fq;
	ck_assert_uint_lt(ncmds, MAX_CMDS);
	c->opcode = req->sqe.opcode;
	c->slba = req->sqe.cdw10 | (uint64_t)req->sqe.cdw11 << 32;
	c->cdw11 = req->sqe.cdw11;
	c->cdw12 = req->sqe.cdw12;
	c->nlb = (req->sqe.cdw12 & 0xffff) + 1;
	c->data_len = req->data_len;
	c->iovcnt = req->iovcnt;
	c->host_to_ctrl = req->host_to_ctrl;
	c->sink = req->sink;
	c->sink_off = req->sink_off;
	memcpy(c->iov, req->iov, sizeof(c->iov));
	if (req->sqe.opcode == NVME_CMD_DSM) {
		ck_assert_uint_eq(req->iovcnt, 1);
		memcpy(&c->dsm, req->iov[0].iov_base, sizeof(c->dsm));
	}
	ck_assert_uint_le(req->iovcnt, NVMF_REQ_MAX_IOV);
	if (complete_in_submit) {
		struct nvme_cqe cqe = { .cid = req->cid };
		nvmf_req_complete(req, &cqe);
	} else {
		pending[npending++] = req;
	}
	return 0;
}

static void fake_shutdown(struct nvmf_queue *fq) { nvmf_queue_transport_quiesced(fq); }
static void fake_free(struct nvmf_queue *fq) { fq->tp = NULL; }

static const struct nvmf_transport_ops fake_ops = {
	.name = "fake",
	.submit = fake_submit,
	.queue_shutdown = fake_shutdown,
	.queue_free = fake_free,
};

/* The same, taking a one-command WRITE's payload in a pipe (as TCP). */
static const struct nvmf_transport_ops fake_pipe_ops = {
	.name = "fake-pipe",
	.pipe_writes = true,
	.submit = fake_submit,
	.queue_shutdown = fake_shutdown,
	.queue_free = fake_free,
};

/* A LIVE queue from the production constructor, with the transport
 * swapped for the fake one (its request slots are large enough). */
static void queue_setup(uint16_t size)
{
	struct nvmf_path_opts o = { .trtype = NVMF_TR_TCP, .tos = -1 };

	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	ck_assert_int_eq(nvmf_queue_init(&q, NULL, &r, 1, size, &o), 0);
	q.ops->queue_free(&q);
	q.ops = &fake_ops;
	nvmf_queue_set_state(&q, NVMF_Q_CONNECTING);
	nvmf_queue_set_state(&q, NVMF_Q_FABRIC_CONNECT);
	nvmf_queue_set_state(&q, NVMF_Q_LIVE);
	ncmds = npending = cb_count = 0;
	cb_err = 1;
	complete_in_submit = false;
}

static void setup(void) { queue_setup(128); }

static void teardown(void)
{
	nvmf_queue_free(&q);
	reactor_stop(&r);
	reactor_fini(&r);
}

static void set_ns(uint32_t lba_size, uint64_t nsze)
{
	memset(&ns, 0, sizeof(ns));
	ns.nsid = 1;
	ns.lba_size = lba_size;
	ns.lba_shift = (uint32_t)__builtin_ctz(lba_size);
	ns.nsze = nsze;
}

static void io_cb(struct nvmf_io *io, int err)
{
	(void)io;
	cb_count++;
	cb_err = err;
}

/* Completes every pending command (status for all), oldest first or
 * newest first, running deferred work in between as the reactor would. */
static void complete_all(uint16_t status, bool reverse)
{
	while (npending) {
		struct nvmf_req *req;
		if (reverse) {
			req = pending[--npending];
		} else {
			req = pending[0];
			memmove(pending, pending + 1, --npending * sizeof(*pending));
		}
		struct nvme_cqe cqe = { .cid = req->cid, .status = (uint16_t)(status << 1) };
		nvmf_req_complete(req, &cqe);
		for (int i = 0; i < 4; i++)
			reactor_poll(&r, 0);
	}
	for (int i = 0; i < 4; i++)
		reactor_poll(&r, 0);
}

/* The iovec under test: pieces of piece bytes with gaps between them, so
 * that a slice crossing a piece boundary is caught. */
static uint8_t *backing;
static struct iovec io_iov[4096];
static unsigned piece_len, gap_len;

static unsigned make_iov(uint64_t len, unsigned piece, unsigned gap)
{
	unsigned n = (unsigned)((len + piece - 1) / piece);

	ck_assert_uint_le(n, 4096);
	free(backing);
	backing = calloc(n, piece + gap);
	ck_assert_ptr_nonnull(backing);
	piece_len = piece;
	gap_len = gap;
	for (unsigned i = 0; i < n; i++) {
		io_iov[i].iov_base = backing + (size_t)i * (piece + gap);
		io_iov[i].iov_len = piece;
	}
	return n;
}

static uint8_t *addr_of(uint64_t off)
{
	return backing + off / piece_len * (piece_len + gap_len) + off % piece_len;
}

/* The commands cover [offset, offset + len) in order, without gaps or
 * overlaps, each within the limits, and their data is the right part of
 * the caller's buffer. */
static void check_coverage(const struct nvmf_io *io, uint8_t opcode, uint32_t max_bytes)
{
	uint64_t pos = io->offset;

	for (unsigned i = 0; i < ncmds; i++) {
		const struct cmd_rec *c = &cmds[i];
		uint64_t bytes = (uint64_t)c->nlb * ns.lba_size;
		ck_assert_uint_eq(c->opcode, opcode);
		ck_assert_uint_eq(c->slba * ns.lba_size, pos);
		ck_assert_uint_le(bytes, max_bytes);
		ck_assert_uint_gt(bytes, 0);
		if (opcode == NVME_CMD_READ || opcode == NVME_CMD_WRITE) {
			uint64_t o = pos - io->offset, got = 0;
			ck_assert_uint_eq(c->data_len, bytes);
			ck_assert_int_eq(c->host_to_ctrl, opcode == NVME_CMD_WRITE);
			for (unsigned k = 0; k < c->iovcnt; k++) {
				ck_assert_ptr_eq(c->iov[k].iov_base, addr_of(o + got));
				ck_assert_uint_le((o + got) % piece_len + c->iov[k].iov_len, piece_len);
				got += c->iov[k].iov_len;
			}
			ck_assert_uint_eq(got, bytes);
		}
		pos += bytes;
	}
	ck_assert_uint_eq(pos, io->offset + io->len);
}

static void rw(enum nvmf_io_op op, uint32_t lba, uint64_t off, uint64_t len, uint32_t max_xfer,
	       unsigned piece, unsigned gap, struct nvmf_io *io)
{
	set_ns(lba, 1u << 24);
	unsigned n = make_iov(len, piece, gap);
	memset(io, 0, sizeof(*io));
	io->op = op;
	io->offset = off;
	io->len = len;
	io->iov = io_iov;
	io->iovcnt = n;
	io->cb = io_cb;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, max_xfer, io), 0);
}

/* Expected command count and byte limit for a read in one piece. */
static void one_rw(uint32_t lba, uint64_t len, uint32_t max_xfer, unsigned want_cmds)
{
	struct nvmf_io io;
	uint32_t eff = max_xfer >= lba ? max_xfer / lba * lba : lba;

	ncmds = npending = cb_count = 0;
	rw(NVMF_IO_READ, lba, 8 * lba, len, max_xfer, (unsigned)len, 0, &io);
	ck_assert_uint_eq(ncmds, want_cmds);
	check_coverage(&io, NVME_CMD_READ, eff);
	ck_assert_uint_eq(cb_count, 0);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
}

START_TEST(below_at_above_max)
{
	one_rw(512, 4096, 131072, 1);
	one_rw(512, 131072 - 512, 131072, 1);
	one_rw(512, 131072, 131072, 1);
	one_rw(512, 131072 + 512, 131072, 2);
	one_rw(512, 1 << 20, 131072, 8);
	one_rw(512, (1 << 20) + 512, 131072, 9);
	one_rw(4096, 4096, 131072, 1);
	one_rw(4096, 131072, 131072, 1);
	one_rw(4096, 131072 + 4096, 131072, 2);
	one_rw(4096, 1 << 20, 131072, 8);
	/* A limit that is not a block multiple rounds down to one. */
	one_rw(4096, 16384, 10000, 2);
	ck_assert_uint_eq(cmds[0].nlb, 2);
	ck_assert_uint_eq(cmds[1].nlb, 2);
	/* A limit below one block still moves one block per command. */
	one_rw(4096, 8192, 1000, 2);
	one_rw(512, 1536, 512, 3);
}
END_TEST

START_TEST(write_fua_fields)
{
	struct nvmf_io io;

	rw(NVMF_IO_WRITE, 512, 1ull << 20, 65536, 32768, 65536, 0, &io);
	(void)io;
	ck_assert_uint_eq(ncmds, 2);
	ck_assert_uint_eq(cmds[0].slba, (1u << 20) / 512);
	ck_assert_uint_eq(cmds[0].nlb, 64);
	ck_assert_uint_eq(cmds[0].cdw12 & NVME_RW_FUA, 0);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);

	ncmds = cb_count = 0;
	set_ns(512, 1u << 24);
	memset(&io, 0, sizeof(io));
	io.op = NVMF_IO_WRITE;
	io.flags = NVMF_IO_FUA;
	io.len = 1024;
	io.iov = io_iov;
	io.iovcnt = 1;
	io.cb = io_cb;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 131072, &io), 0);
	ck_assert_uint_eq(ncmds, 1);
	ck_assert_uint_eq(cmds[0].opcode, NVME_CMD_WRITE);
	ck_assert_uint_ne(cmds[0].cdw12 & NVME_RW_FUA, 0);
	ck_assert(cmds[0].host_to_ctrl);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);
}
END_TEST

/* More pieces than a command can carry: each command takes at most
 * NVMF_REQ_MAX_IOV of them, and still whole blocks. */
START_TEST(fragmented_iovec)
{
	struct nvmf_io io;

	/* 64 pieces of 512 B: 16 per command, below max_xfer. */
	rw(NVMF_IO_READ, 512, 0, 64 * 512, 1 << 20, 512, 64, &io);
	ck_assert_uint_eq(ncmds, 4);
	for (unsigned i = 0; i < ncmds; i++)
		ck_assert_uint_eq(cmds[i].iovcnt, NVMF_REQ_MAX_IOV);
	check_coverage(&io, NVME_CMD_READ, 1 << 20);
	complete_all(0, true);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);

	/* Pieces that do not end on block boundaries: commands start in
	 * the middle of a piece. */
	ncmds = cb_count = 0;
	rw(NVMF_IO_WRITE, 512, 4096, 300 * 512, 1 << 20, 300, 16, &io);
	ck_assert_uint_gt(ncmds, 300 * 512 / (16 * 300));
	check_coverage(&io, NVME_CMD_WRITE, 1 << 20);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);

	/* 4 KiB blocks from 1000-byte pieces. */
	ncmds = cb_count = 0;
	rw(NVMF_IO_READ, 4096, 0, 64 * 4096, 65536, 1000, 8, &io);
	check_coverage(&io, NVME_CMD_READ, 65536);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);
}
END_TEST

/* Sixteen pieces that cannot hold one block: no progress is possible. */
START_TEST(too_fragmented)
{
	struct nvmf_io io;

	rw(NVMF_IO_READ, 4096, 0, 4096, 1 << 20, 16, 0, &io);
	ck_assert_uint_eq(ncmds, 0);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, -EINVAL);

	/* The same after some commands went out: those complete first. */
	cb_count = 0;
	set_ns(512, 1u << 24);
	unsigned n = make_iov(200 * 512, 512, 0);
	for (unsigned i = 16; i < n; i++)
		io_iov[i].iov_len = 8; /* too small from here */
	memset(&io, 0, sizeof(io));
	io.op = NVMF_IO_READ;
	io.len = 16 * 512 + 512;
	io.iov = io_iov;
	io.iovcnt = n;
	io.cb = io_cb;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 1 << 20, &io), 0);
	ck_assert_uint_eq(ncmds, 1);
	ck_assert_uint_eq(cb_count, 0);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, -EINVAL);
}
END_TEST

START_TEST(write_zeroes_limit)
{
	struct nvmf_io io = { .op = NVMF_IO_WRITE_ZEROES, .cb = io_cb };

	set_ns(512, 1ull << 32);
	io.len = 65536ull * 512;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 131072, &io), 0);
	ck_assert_uint_eq(ncmds, 1);
	ck_assert_uint_eq(cmds[0].nlb, 65536);
	ck_assert_uint_ne(cmds[0].cdw12 & NVME_WZ_DEAC, 0);
	ck_assert_uint_eq(cmds[0].data_len, 0);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);

	/* One block more than one command can zero; no deallocation. */
	ncmds = cb_count = 0;
	io.offset = 4096;
	io.len = 65537ull * 4096;
	io.flags = NVMF_IO_NO_DEALLOC;
	set_ns(4096, 1ull << 30);
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 131072, &io), 0);
	ck_assert_uint_eq(ncmds, 2);
	check_coverage(&io, NVME_CMD_WRITE_ZEROES, 65536u * 4096);
	ck_assert_uint_eq(cmds[1].nlb, 1);
	for (unsigned i = 0; i < ncmds; i++)
		ck_assert_uint_eq(cmds[i].cdw12 & NVME_WZ_DEAC, 0);
	complete_all(0, true);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
}
END_TEST

START_TEST(discard_limit)
{
	struct nvmf_io io = { .op = NVMF_IO_DISCARD, .cb = io_cb, .offset = 512 };
	uint64_t blocks = 0;

	set_ns(512, 1ull << 40);
	io.len = 1ull << 30;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 131072, &io), 0);
	ck_assert_uint_eq(ncmds, 1);
	ck_assert_uint_eq(cmds[0].opcode, NVME_CMD_DSM);
	ck_assert_uint_eq(cmds[0].dsm.slba, 1);
	ck_assert_uint_eq(cmds[0].dsm.nlb, (1u << 30) / 512);
	ck_assert_uint_ne(cmds[0].cdw11 & NVME_DSM_ATTR_DEALLOCATE, 0);
	ck_assert(cmds[0].host_to_ctrl);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);

	/* Past what one 32-bit range can hold. */
	ncmds = cb_count = 0;
	io.len = (3ull << 32) * 512;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 131072, &io), 0);
	ck_assert_uint_ge(ncmds, 4);
	uint64_t next = 1;
	for (unsigned i = 0; i < ncmds; i++) {
		ck_assert_uint_eq(cmds[i].dsm.slba, next);
		ck_assert_uint_gt(cmds[i].dsm.nlb, 0);
		next += cmds[i].dsm.nlb;
		blocks += cmds[i].dsm.nlb;
	}
	ck_assert_uint_eq(blocks, 3ull << 32);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);
}
END_TEST

START_TEST(flush_one_command)
{
	struct nvmf_io io = { .op = NVMF_IO_FLUSH, .cb = io_cb };

	set_ns(512, 1024);
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 131072, &io), 0);
	ck_assert_uint_eq(ncmds, 1);
	ck_assert_uint_eq(cmds[0].opcode, NVME_CMD_FLUSH);
	ck_assert_uint_eq(cmds[0].data_len, 0);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
}
END_TEST

START_TEST(rejects_bad_ranges)
{
	struct nvmf_io io;
	static uint8_t buf[8192];
	struct iovec iov = { buf, sizeof(buf) };
	const struct {
		uint64_t off, len;
		unsigned iov_len;
	} bad[] = {
		{ 100, 512, 8192 }, /* misaligned offset */
		{ 0, 1000, 8192 }, /* misaligned length */
		{ 0, 0, 8192 }, /* empty */
		{ 1024 * 512, 512, 8192 }, /* past the end */
		{ 1023 * 512, 1024, 8192 }, /* runs past the end */
		{ 0, 8192, 4096 }, /* buffer shorter than the I/O */
	};

	set_ns(512, 1024);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&io, 0, sizeof(io));
		io.op = NVMF_IO_READ;
		io.offset = bad[i].off;
		io.len = bad[i].len;
		iov.iov_len = bad[i].iov_len;
		io.iov = &iov;
		io.iovcnt = 1;
		io.cb = io_cb;
		ck_assert_int_eq(nvmf_io_submit(&q, &ns, 131072, &io), -EINVAL);
	}
	ck_assert_uint_eq(ncmds, 0);
	ck_assert_uint_eq(cb_count, 0);
}
END_TEST

/* The transport completes each command before submit returns. */
START_TEST(completes_inside_submit)
{
	struct nvmf_io io;

	complete_in_submit = true;
	rw(NVMF_IO_READ, 512, 0, 1 << 20, 65536, 1 << 20, 0, &io);
	ck_assert_uint_eq(ncmds, 16);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
	for (int i = 0; i < 4; i++)
		reactor_poll(&r, 0);
	ck_assert_uint_eq(cb_count, 1);
}
END_TEST

START_TEST(error_completes_once)
{
	struct nvmf_io io;

	rw(NVMF_IO_READ, 512, 0, 1 << 20, 65536, 1 << 20, 0, &io);
	ck_assert_uint_eq(ncmds, 16);
	/* The middle command fails; the others succeed. */
	struct nvmf_req *bad = pending[7];
	struct nvme_cqe cqe = { .cid = bad->cid, .status = 0x281 << 1 };
	memmove(pending + 7, pending + 8, 8 * sizeof(*pending));
	npending--;
	nvmf_req_complete(bad, &cqe);
	ck_assert_uint_eq(cb_count, 0);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_lt(cb_err, 0);
}
END_TEST

/* A lost connection completes every command with the error; the I/O's
 * callback runs once. */
START_TEST(connection_loss_completes_once)
{
	struct nvmf_io io;

	rw(NVMF_IO_WRITE, 4096, 0, 1 << 20, 131072, 4096, 0, &io);
	ck_assert_uint_gt(ncmds, 1);
	npending = 0;
	nvmf_queue_transport_error(&q, -ECONNRESET, "test: connection lost");
	for (int i = 0; i < 4; i++)
		reactor_poll(&r, 0);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, -ECONNRESET);
	ck_assert_uint_eq(q.nr_in_flight, 0);

	/* Submitting on the dead queue fails the I/O once, synchronously. */
	cb_count = 0;
	rw(NVMF_IO_READ, 4096, 0, 65536, 131072, 65536, 0, &io);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_lt(cb_err, 0);
}
END_TEST

/* A queue of 3 entries has 2 requests: a 16-command I/O waits for the
 * pool between completions, whatever order those come in, and several
 * I/Os share it. */
static void pool_wait(bool reverse, bool sync)
{
	struct nvmf_io io[3];
	unsigned cbs_at_end = 0;

	teardown();
	queue_setup(3);
	complete_in_submit = sync;
	for (unsigned k = 0; k < 3; k++) {
		set_ns(512, 1u << 24);
		memset(&io[k], 0, sizeof(io[k]));
		io[k].op = NVMF_IO_READ;
		io[k].offset = (uint64_t)k << 20;
		io[k].len = 1 << 19;
		static uint8_t buf[1 << 19];
		static struct iovec iov = { buf, sizeof(buf) };
		io[k].iov = &iov;
		io[k].iovcnt = 1;
		io[k].cb = io_cb;
		ck_assert_int_eq(nvmf_io_submit(&q, &ns, 32768, &io[k]), 0);
	}
	for (int guard = 0; guard < 1000 && (npending || cbs_at_end < 3); guard++) {
		if (npending) {
			struct nvmf_req *req = reverse ? pending[--npending] : pending[0];
			if (!reverse)
				memmove(pending, pending + 1, --npending * sizeof(*pending));
			struct nvme_cqe cqe = { .cid = req->cid };
			nvmf_req_complete(req, &cqe);
		}
		reactor_poll(&r, 0);
		cbs_at_end = cb_count;
	}
	for (int i = 0; i < 8; i++)
		reactor_poll(&r, 0);
	ck_assert_uint_eq(ncmds, 3 * 16);
	ck_assert_uint_eq(cb_count, 3);
	ck_assert_int_eq(cb_err, 0);
	ck_assert_uint_eq(q.nr_in_flight, 0);
}

START_TEST(pool_exhaustion_in_order) { pool_wait(false, false); }
END_TEST

START_TEST(pool_exhaustion_reverse) { pool_wait(true, false); }
END_TEST

START_TEST(pool_exhaustion_sync) { pool_wait(false, true); }
END_TEST

/* A queue of 5 entries (4 requests) full, an I/O X waiting for one, and
 * with every completion a new one-command I/O submitted in the same batch
 * (an NBD request read alongside the NVMe completions), before the
 * deferred wake: X still gets the next free request, and the I/Os behind
 * it go out in the order they came.  Before, each new I/O took the slot
 * the completion freed and X waited as long as the load lasted. */
#define FIFO_IOS 64u

static struct nvmf_io fifo_io[FIFO_IOS];
static uint8_t fifo_buf[4096];
static struct iovec fifo_iov = { fifo_buf, sizeof(fifo_buf) };

static void fifo_submit(unsigned k)
{
	struct nvmf_io *io = &fifo_io[k];

	memset(io, 0, sizeof(*io));
	io->op = NVMF_IO_READ;
	io->offset = (uint64_t)k * 4096; /* its place in the order: slba k * 8 */
	io->len = 4096;
	io->iov = &fifo_iov;
	io->iovcnt = 1;
	io->cb = io_cb;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 4096, io), 0);
}

START_TEST(waiter_served_before_new_submissions)
{
	const unsigned x = 4; /* the fifth: the pool has four requests */
	unsigned next = 0, completions = 0, x_after = 0;

	teardown();
	queue_setup(5);
	set_ns(512, 1u << 20);
	for (; next <= x; next++)
		fifo_submit(next);
	ck_assert_uint_eq(ncmds, 4);
	ck_assert(fifo_io[x].waiting);
	while (next < FIFO_IOS && npending) {
		struct nvmf_req *req = pending[0];
		memmove(pending, pending + 1, --npending * sizeof(*pending));
		struct nvme_cqe cqe = { .cid = req->cid };
		nvmf_req_complete(req, &cqe);
		completions++;
		fifo_submit(next++);
		for (int i = 0; i < 4; i++)
			reactor_poll(&r, 0);
		if (!x_after && !fifo_io[x].waiting)
			x_after = completions;
	}
	ck_assert_msg(x_after && x_after <= 4,
		      "the waiting I/O was not submitted within 4 completions (%u completions, "
		      "%u I/Os submitted after it, %u commands sent)",
		      completions, next - x - 1, ncmds);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, next);
	ck_assert_int_eq(cb_err, 0);
	ck_assert_uint_eq(q.nr_in_flight, 0);
	/* Every I/O's command went out in submission order. */
	ck_assert_uint_eq(ncmds, next);
	for (unsigned i = 0; i < ncmds; i++)
		ck_assert_uint_eq(cmds[i].slba, (uint64_t)i * 8);
}
END_TEST

/* A waiting I/O split in several commands keeps its place while its own
 * commands complete, and sends its parts in order between the others'. */
START_TEST(split_waiter_keeps_its_place)
{
	struct nvmf_io big;
	static uint8_t buf[32768];
	struct iovec iov = { buf, sizeof(buf) };

	teardown();
	queue_setup(3); /* two requests */
	set_ns(512, 1u << 20);
	memset(&big, 0, sizeof(big));
	big.op = NVMF_IO_READ;
	big.offset = 1 << 19;
	big.len = sizeof(buf);
	big.iov = &iov;
	big.iovcnt = 1;
	big.cb = io_cb;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 4096, &big), 0); /* 8 commands, 2 sent */
	ck_assert(big.waiting);
	fifo_submit(0); /* behind it */
	ck_assert(fifo_io[0].waiting);
	/* One of its own commands back: it is still first in line. */
	struct nvmf_req *req = pending[0];
	memmove(pending, pending + 1, --npending * sizeof(*pending));
	struct nvme_cqe cqe = { .cid = req->cid };
	nvmf_req_complete(req, &cqe);
	for (int i = 0; i < 4; i++)
		reactor_poll(&r, 0);
	ck_assert_uint_eq(ncmds, 3);
	ck_assert_uint_eq(cmds[2].slba, ((1u << 19) + 8192) / 512);
	ck_assert(fifo_io[0].waiting);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 2);
	ck_assert_int_eq(cb_err, 0);
	ck_assert_uint_eq(ncmds, 9);
	/* The big I/O's parts in order, the small one somewhere between. */
	uint64_t pos = (1u << 19) / 512;
	for (unsigned i = 0; i < ncmds; i++) {
		if (cmds[i].slba == 0)
			continue;
		ck_assert_uint_eq(cmds[i].slba, pos);
		pos += 8;
	}
	ck_assert_uint_eq(pos, ((1u << 19) + sizeof(buf)) / 512);
}
END_TEST

/* A read's pipe goes with every command, each with its place in the
 * stream (the transport appends a part only behind the parts before it);
 * a write's only when the write is one command. */
START_TEST(sink_with_every_read_command)
{
	static uint8_t buf[256 * 1024];
	struct iovec iov = { buf, sizeof(buf) };
	struct pipe_sink sk;
	struct nvmf_io io;

	ck_assert_int_eq(pipe_sink_open(&sk, 0), 0);
	set_ns(512, 1u << 24);
	memset(&io, 0, sizeof(io));
	io.op = NVMF_IO_READ;
	io.len = 128 * 1024;
	io.iov = &iov;
	io.iovcnt = 1;
	io.sink = &sk;
	io.cb = io_cb;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 1 << 20, &io), 0);
	ck_assert_uint_eq(ncmds, 1);
	ck_assert_ptr_eq(cmds[0].sink, &sk);
	complete_all(0, false);

	ncmds = 0;
	io.len = sizeof(buf);
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 128 * 1024, &io), 0);
	ck_assert_uint_eq(ncmds, 2);
	ck_assert_ptr_eq(cmds[0].sink, &sk);
	ck_assert_ptr_eq(cmds[1].sink, &sk);
	ck_assert_uint_eq(cmds[0].sink_off, 0);
	ck_assert_uint_eq(cmds[1].sink_off, 128 * 1024);
	complete_all(0, false);

	ncmds = 0;
	io.op = NVMF_IO_WRITE;
	io.len = 4096;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 1 << 20, &io), 0);
	ck_assert_ptr_null(cmds[0].sink);
	complete_all(0, false);
	pipe_sink_close(&sk);
}
END_TEST

/* An attempt after a failed one (multipath sends the read again, maybe
 * to a path with a smaller MDTS, so as several commands) starts with
 * the pipe as its owner left it: the prefix alone.  Before, only an
 * attempt of one command reset it, and the owner found bytes of the
 * failed attempt counted in the pipe next to a payload in the buffer. */
START_TEST(new_attempt_resets_the_pipe)
{
	static uint8_t buf[256 * 1024];
	struct iovec iov = { buf, sizeof(buf) };
	struct pipe_sink sk;
	struct nvmf_io io;
	uint8_t left[64];

	ck_assert_int_eq(pipe_sink_open(&sk, 0), 0);
	ck_assert_int_eq(pipe_sink_set_prefix(&sk, "HDR!", 4), 0);
	ck_assert_int_eq(pipe_sink_put(&sk, buf, 3000), 0); /* the failed attempt's */
	set_ns(512, 1u << 24);
	memset(&io, 0, sizeof(io));
	io.op = NVMF_IO_READ;
	io.len = sizeof(buf);
	io.iov = &iov;
	io.iovcnt = 1;
	io.sink = &sk;
	io.cb = io_cb;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 128 * 1024, &io), 0);
	ck_assert_uint_eq(ncmds, 2);
	ck_assert_uint_eq(sk.filled, 0);
	ck_assert(!sk.broken);
	ck_assert_int_eq(read(sk.rfd, left, sizeof(left)), 4);
	ck_assert_mem_eq(left, "HDR!", 4);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
	pipe_sink_close(&sk);
}
END_TEST

/* io: a read of len bytes into iov with the pipe sk (1 MiB, opened here)
 * on a namespace of 512-byte blocks. */
static void read_setup(struct nvmf_io *io, struct pipe_sink *sk, const struct iovec *iov,
		       uint64_t len)
{
	ck_assert_int_eq(pipe_sink_open(sk, 1u << 20), 0);
	set_ns(512, 1u << 24);
	memset(io, 0, sizeof(*io));
	io->op = NVMF_IO_READ;
	io->len = len;
	io->iov = iov;
	io->iovcnt = 1;
	io->sink = sk;
	io->cb = io_cb;
}

/* Completes a split read's commands in the order given, each doing what
 * the transport does with its data: into the pipe when the pipe holds
 * exactly the parts before it, else into its buffer. */
static void read_parts_arrive(const uint8_t *data, const unsigned *order, unsigned n)
{
	struct nvmf_req *reqs[16];

	ck_assert_uint_eq(npending, n);
	memcpy(reqs, pending, n * sizeof(*reqs));
	npending = 0;
	for (unsigned k = 0; k < n; k++) {
		struct nvmf_req *req = reqs[order[k]];
		const uint8_t *part = data + req->sink_off;
		if (req->sink && req->sink->filled == req->sink_off)
			ck_assert_int_eq(pipe_sink_put(req->sink, part, req->data_len), 0);
		else
			iov_copy_to(req->iov, req->iovcnt, 0, part, req->data_len);
		struct nvme_cqe cqe = { .cid = req->cid };
		nvmf_req_complete(req, &cqe);
		for (int i = 0; i < 4; i++)
			reactor_poll(&r, 0);
	}
}

/* A read split in 4 whose parts come in order ends wholly in the pipe;
 * one whose parts come out of order ends wholly in the buffer, the pipe
 * holding its prefix alone, ready for the next read. */
static void split_read_parts(const unsigned *order, bool in_pipe)
{
	static uint8_t data[512 * 1024], buf[512 * 1024], got[512 * 1024 + 8];
	struct iovec iov = { buf, sizeof(buf) };
	struct pipe_sink sk;
	struct nvmf_io io;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + (i >> 12));
	memset(buf, 0, sizeof(buf));
	read_setup(&io, &sk, &iov, sizeof(data));
	ck_assert_int_eq(pipe_sink_set_prefix(&sk, "HDR!", 4), 0);
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 128 * 1024, &io), 0);
	ck_assert_uint_eq(ncmds, 4);
	read_parts_arrive(data, order, 4);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
	ck_assert(!sk.broken);
	if (in_pipe) {
		ck_assert(!io.pipe_joined);
		ck_assert_uint_eq(sk.filled, sizeof(data));
		size_t have = 0;
		ssize_t r;
		while ((r = read(sk.rfd, got + have, sizeof(got) - have)) > 0)
			have += (size_t)r;
		ck_assert_uint_eq(have, 4 + sizeof(data));
		ck_assert_mem_eq(got, "HDR!", 4);
		ck_assert(memcmp(got + 4, data, sizeof(data)) == 0);
	} else {
		ck_assert(io.pipe_joined);
		ck_assert_uint_eq(sk.filled, 0);
		ck_assert(memcmp(buf, data, sizeof(data)) == 0);
		ck_assert_int_eq(read(sk.rfd, got, sizeof(got)), 4);
		ck_assert_mem_eq(got, "HDR!", 4);
	}
	pipe_sink_close(&sk);
}

START_TEST(split_read_in_order_fills_the_pipe)
{
	static const unsigned order[] = { 0, 1, 2, 3 };
	split_read_parts(order, true);
}
END_TEST

/* The second part first: the first fills the pipe, the rest go to the
 * buffer, and the pipe's part joins them. */
START_TEST(split_read_out_of_order_joins_the_buffer)
{
	static const unsigned order[] = { 0, 2, 1, 3 };
	split_read_parts(order, false);
}
END_TEST

/* The last part first: nothing goes to the pipe after it either. */
START_TEST(split_read_reversed_ends_in_the_buffer)
{
	static const unsigned order[] = { 3, 2, 1, 0 };
	split_read_parts(order, false);
}
END_TEST

/* A pipe that cannot give its part back fails the read (EIO): those bytes
 * are gone, a retry reads them again. */
START_TEST(split_read_broken_join_is_eio)
{
	static uint8_t data[256 * 1024], buf[256 * 1024];
	struct iovec iov = { buf, sizeof(buf) };
	struct pipe_sink sk;
	struct nvmf_io io;

	memset(data, 0x5a, sizeof(data));
	read_setup(&io, &sk, &iov, sizeof(data));
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 128 * 1024, &io), 0);
	ck_assert_uint_eq(ncmds, 2);
	/* The first part is in the pipe; the second comes early in effect
	 * (the transport gave the pipe up), and the pipe then breaks. */
	struct nvmf_req *first = pending[0], *second = pending[1];
	npending = 0;
	second->sink = NULL;
	iov_copy_to(second->iov, second->iovcnt, 0, data, second->data_len);
	struct nvme_cqe c2 = { .cid = second->cid };
	nvmf_req_complete(second, &c2);
	ck_assert_int_eq(pipe_sink_put(&sk, data, first->data_len), 0);
	sk.broken = true;
	struct nvme_cqe c1 = { .cid = first->cid };
	nvmf_req_complete(first, &c1);
	for (int i = 0; i < 8; i++)
		reactor_poll(&r, 0);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, -EIO);

	/* Sent again (multipath does, at once): the broken pipe keeps its
	 * count and cannot be reset.  Before, every attempt kept it and
	 * failed at the end the same way, for ever; now the attempt goes
	 * without it and reads into the buffer. */
	for (int attempt = 0; attempt < 2; attempt++) {
		ncmds = 0;
		memset(buf, 0, sizeof(buf));
		ck_assert_int_eq(nvmf_io_submit(&q, &ns, 128 * 1024, &io), 0);
		ck_assert_uint_eq(ncmds, 2);
		ck_assert_ptr_null(cmds[0].sink);
		ck_assert_ptr_null(cmds[1].sink);
		while (npending) {
			struct nvmf_req *req = pending[--npending];
			iov_copy_to(req->iov, req->iovcnt, 0, data, req->data_len);
			struct nvme_cqe c = { .cid = req->cid };
			nvmf_req_complete(req, &c);
		}
		for (int i = 0; i < 8; i++)
			reactor_poll(&r, 0);
		ck_assert_uint_eq(cb_count, 2 + (unsigned)attempt);
		ck_assert_int_eq(cb_err, 0);
		ck_assert(memcmp(buf, data, sizeof(buf)) == 0);
	}
	pipe_sink_close(&sk);
}
END_TEST

/* A pipe that broke after taking every byte of the read (filled == len)
 * holds nothing the owner can send: the read fails, not a reply from a
 * buffer that never got the bytes. */
START_TEST(read_broken_full_pipe_is_eio)
{
	static uint8_t data[128 * 1024], buf[128 * 1024];
	struct iovec iov = { buf, sizeof(buf) };
	struct pipe_sink sk;
	struct nvmf_io io;

	memset(data, 0xa5, sizeof(data));
	read_setup(&io, &sk, &iov, sizeof(data));
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 1 << 20, &io), 0);
	ck_assert_uint_eq(ncmds, 1);
	struct nvmf_req *req = pending[--npending];
	ck_assert_int_eq(pipe_sink_put(&sk, data, sizeof(data)), 0);
	sk.broken = true;
	struct nvme_cqe c = { .cid = req->cid };
	nvmf_req_complete(req, &c);
	for (int i = 0; i < 8; i++)
		reactor_poll(&r, 0);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, -EIO);
	pipe_sink_close(&sk);
}
END_TEST

/* ---- WRITE payloads in a pipe ---- */

enum { WP_LEN = 256 * 1024 };

static struct pipe_sink wp;
static uint8_t wp_data[WP_LEN], wp_buf[WP_LEN];
static struct iovec wp_iov = { wp_buf, sizeof(wp_buf) };

/* A write of len bytes whose payload is wholly in the pipe wp, its
 * buffer zeroed (where the payload lands if taken out). */
static void wp_setup(struct nvmf_io *io, uint32_t len)
{
	for (size_t i = 0; i < sizeof(wp_data); i++)
		wp_data[i] = (uint8_t)(i * 13 + (i >> 9));
	memset(wp_buf, 0, sizeof(wp_buf));
	ck_assert_int_eq(pipe_sink_open(&wp, 512 * 1024), 0);
	ck_assert_int_eq(pipe_sink_put(&wp, wp_data, len), 0);
	set_ns(512, 1u << 24);
	memset(io, 0, sizeof(*io));
	io->op = NVMF_IO_WRITE;
	io->len = len;
	io->iov = &wp_iov;
	io->iovcnt = 1;
	io->sink = &wp;
	io->cb = io_cb;
}

/* The payload is in the buffer, the pipe empty and still usable, and no
 * command carries the pipe: each one's iovec is its part of the data. */
static void assert_wp_taken_out(uint32_t len)
{
	uint8_t b;
	uint64_t pos = 0;

	ck_assert(!wp.broken);
	ck_assert_uint_eq(wp.filled, 0);
	ck_assert_int_eq(read(wp.rfd, &b, 1), -1);
	ck_assert(memcmp(wp_buf, wp_data, len) == 0);
	for (unsigned i = 0; i < ncmds; i++) {
		ck_assert_ptr_null(cmds[i].sink);
		for (unsigned k = 0; k < cmds[i].iovcnt; k++) {
			ck_assert(memcmp(cmds[i].iov[k].iov_base, wp_data + pos,
					 cmds[i].iov[k].iov_len) == 0);
			pos += cmds[i].iov[k].iov_len;
		}
	}
	ck_assert_uint_eq(pos, len);
}

/* The pipe holds exactly the payload (read back, so only at the end). */
static void assert_wp_full(uint32_t len)
{
	static uint8_t got[WP_LEN + 1];
	size_t n = 0;
	ssize_t r;

	ck_assert(!wp.broken);
	ck_assert_uint_eq(wp.filled, len);
	while (n < sizeof(got) && (r = read(wp.rfd, got + n, sizeof(got) - n)) > 0)
		n += (size_t)r;
	ck_assert_uint_eq(n, len);
	ck_assert(memcmp(got, wp_data, len) == 0);
}

/* Split at MDTS: a pipe holds one stream, so the payload comes out into
 * the buffer before the first command, even on a transport that sends
 * from pipes. */
START_TEST(write_pipe_split_takes_out)
{
	struct nvmf_io io;

	q.ops = &fake_pipe_ops;
	wp_setup(&io, WP_LEN);
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 64 * 1024, &io), 0);
	ck_assert_uint_eq(ncmds, 4);
	assert_wp_taken_out(WP_LEN);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
	pipe_sink_close(&wp);
}
END_TEST

/* A transport without pipe_writes gets the buffer, even for one command. */
START_TEST(write_pipe_no_pipe_writes_takes_out)
{
	struct nvmf_io io;

	wp_setup(&io, 128 * 1024);
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 1 << 20, &io), 0);
	ck_assert_uint_eq(ncmds, 1);
	assert_wp_taken_out(128 * 1024);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
	pipe_sink_close(&wp);
}
END_TEST

/* One command on a transport that sends from pipes: the command carries
 * the pipe, still full, and the buffer is untouched. */
START_TEST(write_pipe_one_command_keeps_pipe)
{
	static const uint8_t zero[WP_LEN];
	struct nvmf_io io;

	q.ops = &fake_pipe_ops;
	wp_setup(&io, 128 * 1024);
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 1 << 20, &io), 0);
	ck_assert_uint_eq(ncmds, 1);
	ck_assert_ptr_eq(cmds[0].sink, &wp);
	ck_assert_uint_eq(cmds[0].data_len, 128 * 1024);
	ck_assert_uint_eq(wp.filled, 128 * 1024);
	ck_assert(memcmp(wp_buf, zero, sizeof(zero)) == 0);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
	assert_wp_full(128 * 1024);
	pipe_sink_close(&wp);
}
END_TEST

/* A pipe that fails loses the payload: -EIO at submit, no command sent,
 * no callback. */
START_TEST(write_pipe_broken_is_eio)
{
	struct nvmf_io io;
	static uint8_t stolen[4096];

	/* Taking out fails: bytes vanished behind the sink's back. */
	wp_setup(&io, WP_LEN);
	ck_assert_int_eq(read(wp.rfd, stolen, sizeof(stolen)), (ssize_t)sizeof(stolen));
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 64 * 1024, &io), -EIO);
	ck_assert_uint_eq(ncmds, 0);
	pipe_sink_close(&wp);

	/* Sending from it: a pipe already broken. */
	q.ops = &fake_pipe_ops;
	wp_setup(&io, 128 * 1024);
	wp.broken = true;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 1 << 20, &io), -EIO);
	ck_assert_uint_eq(ncmds, 0);
	reactor_poll(&r, 0);
	ck_assert_uint_eq(cb_count, 0);
	pipe_sink_close(&wp);
}
END_TEST

/* Multipath sends a failed write again (nvmf_io_submit once more): the
 * transport left the caller's pipe full, so the second attempt as one
 * command carries it again; split the second time, it comes out then. */
START_TEST(write_pipe_retry_still_full)
{
	struct nvmf_io io;

	q.ops = &fake_pipe_ops;
	wp_setup(&io, 128 * 1024);
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 1 << 20, &io), 0);
	ck_assert_ptr_eq(cmds[0].sink, &wp);
	complete_all(0x6 /* Internal Error */, false);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_ne(cb_err, 0);

	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 1 << 20, &io), 0);
	ck_assert_uint_eq(ncmds, 2);
	ck_assert_ptr_eq(cmds[1].sink, &wp);
	ck_assert_uint_eq(wp.filled, 128 * 1024);
	complete_all(0x6 /* Internal Error */, false);
	ck_assert_uint_eq(cb_count, 2);

	ncmds = 0;
	ck_assert_int_eq(nvmf_io_submit(&q, &ns, 32 * 1024, &io), 0);
	ck_assert_uint_eq(ncmds, 4);
	assert_wp_taken_out(128 * 1024);
	complete_all(0, false);
	ck_assert_uint_eq(cb_count, 3);
	ck_assert_int_eq(cb_err, 0);
	pipe_sink_close(&wp);
}
END_TEST

static Suite *io_suite(void)
{
	Suite *s = suite_create("io_split");
	TCase *tc = tcase_create("io");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, below_at_above_max);
	tcase_add_test(tc, write_fua_fields);
	tcase_add_test(tc, fragmented_iovec);
	tcase_add_test(tc, too_fragmented);
	tcase_add_test(tc, write_zeroes_limit);
	tcase_add_test(tc, discard_limit);
	tcase_add_test(tc, flush_one_command);
	tcase_add_test(tc, rejects_bad_ranges);
	tcase_add_test(tc, completes_inside_submit);
	tcase_add_test(tc, error_completes_once);
	tcase_add_test(tc, connection_loss_completes_once);
	tcase_add_test(tc, pool_exhaustion_in_order);
	tcase_add_test(tc, pool_exhaustion_reverse);
	tcase_add_test(tc, pool_exhaustion_sync);
	tcase_add_test(tc, waiter_served_before_new_submissions);
	tcase_add_test(tc, split_waiter_keeps_its_place);
	tcase_add_test(tc, sink_with_every_read_command);
	tcase_add_test(tc, new_attempt_resets_the_pipe);
	tcase_add_test(tc, split_read_in_order_fills_the_pipe);
	tcase_add_test(tc, split_read_out_of_order_joins_the_buffer);
	tcase_add_test(tc, split_read_reversed_ends_in_the_buffer);
	tcase_add_test(tc, split_read_broken_join_is_eio);
	tcase_add_test(tc, read_broken_full_pipe_is_eio);
	tcase_add_test(tc, write_pipe_split_takes_out);
	tcase_add_test(tc, write_pipe_no_pipe_writes_takes_out);
	tcase_add_test(tc, write_pipe_one_command_keeps_pipe);
	tcase_add_test(tc, write_pipe_broken_is_eio);
	tcase_add_test(tc, write_pipe_retry_still_full);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	unit_need_io_uring();
	SRunner *sr = srunner_create(io_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
