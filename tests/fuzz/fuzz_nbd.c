/* libFuzzer harness for the NBD server: the input is everything a client
 * sends, fed through a socketpair into a real connection (handshake and
 * transmission, or kernel mode when the first byte is odd) over a RAM
 * volume, while the harness reads every reply.  The connection must end
 * (EOF or protocol error) without a crash, a leak or a hang.
 *
 * When bit 2 of the first byte is set, the volume holds every I/O instead
 * of completing it, and a schedule from the input (byte 1: its length,
 * then that many bytes) decides, round by round, which held I/O completes
 * (with the RAM volume's result or an error), in any order, or none yet:
 * so the client's EOF or a protocol error can tear the connection down
 * with I/O in flight.  Checked: a vol_io is never submitted while it is
 * still held (one request, one place), every submitted I/O completes
 * exactly once, the connection ends only after the last of them (ASan
 * would see a completion into freed memory) and the volume's in-flight
 * count is back to 0.
 *
 * Held or not, what the client is sent must carry each READ the volume
 * completed, whole: the bytes the RAM volume held when it served the READ
 * (at its release, when held) must appear, in one piece, in the reply
 * stream, whenever the connection ended with NBD_CMD_DISC (in order, so
 * every reply went out) and without TLS (the stream is ciphertext then).
 *
 * When bit 3 of the first byte is set, the listener has TLS with a PSK
 * (bit 4: tls = require, else on): NBD_OPT_STARTTLS, the refusals before
 * it and OpenSSL's handshake on memory BIOs see the input too (a real
 * ClientHello is among the seeds; the handshake cannot finish, so the
 * options inside TLS are reached only by the functional tests).
 *
 * When bit 5 of the first byte is set, requests from 512 bytes up go
 * through pipes (nbd/splice.c; nbd_splice_set_min), for socket clients
 * too (NVMF_GATEWAY_SPLICE_WRITES=all and SIGPIPE ignored, for every
 * input): READ replies out of a pipe, WRITE payloads spliced from the
 * socket.  The held volume then takes writes in their pipe (pipe_writes)
 * and each release decides (from the schedule byte) whether a READ's
 * payload goes into its pipe, wholly, as the NVMe/TCP transport puts it,
 * or into the buffer, and whether a WRITE is copied out of a duplicate of
 * its pipe (which keeps it, as when sent from it) or taken out into the
 * buffer.  Checked after every input, pipes or not: no descriptor is left
 * open and the process's pipe budget is back where it was.  An input with
 * pipes but neither holds nor TLS runs again without pipes: the RAM
 * volume must end with the same bytes, and the client must have been sent
 * the same bytes (in any order) when both connections ended with
 * NBD_CMD_DISC. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "gateway/base/pipe_sink.h"
#include "gateway/base/reactor.h"
#include "gateway/volume/volume.h"
#include "nbd/nbd.h"

#include "tests/fuzz/fuzz_check.h"

#define VOL_SIZE (1u << 20)

static struct reactor R;
static struct nbd_tls *TLS_ON, *TLS_REQ;
static struct volume *V, *VH;
static struct nbd_export E[2], EH[2];
static struct nbd_export *EX[2], *EXH[2];

/* The held volume: a RAM volume whose submit parks the I/O. */
#define HELD_MAX 1024
static const struct vol_ops *mem_ops;
static struct vol_ops held_ops;
static struct vol_io *held[HELD_MAX];
static unsigned nr_held;
static uint64_t submitted, completed;
/* A pipe of the harness's own (outside the budget) that a WRITE's pipe
 * is duplicated into, to copy the payload out and leave it there. */
static struct pipe_sink DUP;

static void held_submit(struct volume *v, struct vol_io *io)
{
	(void)v;
	for (unsigned i = 0; i < nr_held; i++)
		check(held[i] != io); /* submitted again while in flight */
	if (io->sink) {
		check(!io->sink->broken);
		/* A READ's pipe holds its reply header only; a WRITE's payload
		 * is wholly in its pipe or wholly in the buffer. */
		if (io->op == VOL_READ)
			check(io->sink->filled == 0 && io->sink->prefix_len > 0);
		else
			check(io->op == VOL_WRITE &&
			      (io->sink->filled == 0 || io->sink->filled == io->length));
	}
	check(nr_held < HELD_MAX);
	held[nr_held++] = io;
	submitted++;
}

/* A READ's payload into its pipe, wholly, as the NVMe/TCP transport puts
 * it; if it does not all fit, back into the buffer (false). */
static bool read_to_pipe(struct vol_io *io, int *err)
{
	int ret = pipe_sink_put(io->sink, vol_mem_data(VH) + io->offset, io->length);

	if (ret == 0)
		return true;
	if (pipe_sink_unsplice(io->sink, io->iov, io->iovcnt) < 0)
		*err = -EIO;
	return false;
}

/* A WRITE's payload into the RAM volume from a duplicate of its pipe,
 * which keeps it (as a transport that sends from the pipe does). */
static bool write_from_pipe(struct vol_io *io)
{
	struct iovec iov = { vol_mem_data(VH) + io->offset, io->length };

	if (!pipe_sink_is_open(&DUP))
		return false;
	if (pipe_sink_tee(&DUP, io->sink) < 0 || DUP.filled != io->length ||
	    pipe_sink_unsplice(&DUP, &iov, 1) < 0) {
		/* io->sink is as it was; DUP starts over. */
		pipe_sink_close(&DUP);
		pipe_sink_open(&DUP, 1u << 20);
		return false;
	}
	return true;
}

/* Each READ released with success: where its bytes, as the RAM volume
 * held them at the release, are kept; and what the client was sent.  A
 * run that outgrows either is not checked. */
#define EXPECT_BYTES (4u << 20)
#define EXPECT_MAX 1024
#define REPLY_BYTES (8u << 20)
static uint8_t expect_data[EXPECT_BYTES], reply_data[REPLY_BYTES];
static struct {
	size_t at, len;
} expect[EXPECT_MAX];
static size_t expect_used, reply_kept;
static unsigned nr_expect;
static bool expect_lost;

static void expect_read(struct volume *v, const struct vol_io *io)
{
	if (nr_expect == EXPECT_MAX || io->length > EXPECT_BYTES - expect_used) {
		expect_lost = true;
		return;
	}
	memcpy(expect_data + expect_used, vol_mem_data(v) + io->offset, io->length);
	expect[nr_expect].at = expect_used;
	expect[nr_expect++].len = io->length;
	expect_used += io->length;
}

/* Completes held[i]: through the RAM volume (its data, its status), or
 * with an error.  Either way the callback runs later, from the reactor.
 * pipe: a READ with a pipe gets its payload there, a WRITE in its pipe
 * is copied out of it; else both go through the buffer.  A failure with
 * pipe leaves the I/O's pipe broken, part of a READ's payload in it, as a
 * transport whose splice failed does. */
static void release(unsigned i, bool fail, bool pipe)
{
	struct vol_io *io = held[i];
	int err = 0;

	held[i] = held[--nr_held];
	completed++;
	if (fail) {
		if (pipe && io->sink) {
			if (io->op == VOL_READ)
				pipe_sink_put(io->sink, vol_mem_data(VH) + io->offset,
					      io->length / 2);
			io->sink->broken = true;
		}
		vol_complete(&R, io, -EIO);
		return;
	}
	if (io->sink && io->op == VOL_READ) {
		if ((pipe && read_to_pipe(io, &err)) || err) {
			if (!err)
				expect_read(VH, io);
			vol_complete(&R, io, err);
			return;
		}
	} else if (io->sink && io->op == VOL_WRITE && io->sink->filled) {
		if (pipe && write_from_pipe(io)) {
			vol_complete(&R, io, 0);
			return;
		}
		/* Taken out into the buffer, as a layer that cannot send
		 * from a pipe does. */
		if (pipe_sink_unsplice(io->sink, io->iov, io->iovcnt) < 0) {
			vol_complete(&R, io, -EIO);
			return;
		}
	}
	if (io->op == VOL_READ)
		expect_read(VH, io); /* the RAM volume's READ always succeeds */
	mem_ops->submit(VH, io);
}

/* The volume without holds: the RAM volume, its READs recorded as they
 * are served (at submit; the completion only runs later). */
static struct vol_ops plain_ops;

static void plain_submit(struct volume *v, struct vol_io *io)
{
	if (io->op == VOL_READ)
		expect_read(v, io);
	mem_ops->submit(v, io);
}

/* One round of the schedule; true when it released something. */
static bool schedule_step(uint8_t s)
{
	if (!nr_held)
		return false;
	switch (s & 3) {
	case 0: /* not yet */
		return false;
	case 1:
	case 2:
		release((s >> 2) % nr_held, (s & 3) == 2, s & 0x80);
		return true;
	default: /* all of them, last first */
		while (nr_held)
			release(nr_held - 1, s & 4, s & 8);
		return true;
	}
}

static void init_once(void)
{
	static int done;
	if (done)
		return;
	done = 1;
	log_set_level(LOG_LVL_ERR);
	/* Pipes need both (the write mode is read once, at the first large
	 * write); inputs without bit 5 keep the default threshold. */
	signal(SIGPIPE, SIG_IGN);
	setenv("NVMF_GATEWAY_SPLICE_WRITES", "all", 1);
	if (reactor_init(&R, 0, 256) < 0 ||
	    vol_mem_create("fuzz", VOL_SIZE, 512,
			   VOL_CAP_FLUSH | VOL_CAP_FUA | VOL_CAP_TRIM | VOL_CAP_WRITE_ZEROES |
				   VOL_CAP_FAST_ZERO,
			   1, &V) < 0)
		abort();
	/* Small, so that payload-size paths are reachable with small inputs. */
	V->max_io = 64 * 1024;
	E[0] = (struct nbd_export){ .name = "disk", .description = "fuzz", .vol = V };
	E[1] = (struct nbd_export){ .name = "ro", .vol = V, .read_only = true };
	EX[0] = &E[0];
	EX[1] = &E[1];
	if (vol_mem_create("held", 1 << 20, 512,
			   VOL_CAP_FLUSH | VOL_CAP_FUA | VOL_CAP_TRIM | VOL_CAP_WRITE_ZEROES |
				   VOL_CAP_FAST_ZERO,
			   1, &VH) < 0)
		abort();
	VH->max_io = 64 * 1024;
	mem_ops = VH->ops;
	plain_ops = *mem_ops;
	plain_ops.submit = plain_submit;
	V->ops = &plain_ops;
	held_ops = *mem_ops;
	held_ops.name = "held";
	held_ops.submit = held_submit;
	VH->ops = &held_ops;
	EH[0] = (struct nbd_export){ .name = "disk", .description = "held", .vol = VH };
	EH[1] = (struct nbd_export){ .name = "ro", .vol = VH, .read_only = true };
	EXH[0] = &EH[0];
	EXH[1] = &EH[1];

	char psk[] = "/tmp/fuzz-nbd-psk.XXXXXX", err[256];
	int fd = mkstemp(psk);
	static const char line[] = "alice:000102030405060708090a0b0c0d0e0f"
				   "101112131415161718191a1b1c1d1e1f\n";
	if (fd < 0 || write(fd, line, sizeof(line) - 1) != (ssize_t)(sizeof(line) - 1))
		abort();
	close(fd);
	if (nbd_tls_new(&(struct nbd_tls_opts){ .mode = NBD_TLS_ON, .psk_file = psk }, &TLS_ON,
			err, sizeof(err)) < 0 ||
	    nbd_tls_new(&(struct nbd_tls_opts){ .mode = NBD_TLS_REQUIRE, .psk_file = psk },
			&TLS_REQ, err, sizeof(err)) < 0)
		abort();
	unlink(psk);
	/* pipe_sink.c keeps a /dev/null open from its first discard on: open
	 * it now, so that the descriptor count per input is exact. */
	if (pipe_sink_open(&DUP, 1u << 20) < 0 || pipe_sink_put(&DUP, "x", 1) < 0 ||
	    pipe_sink_empty(&DUP) < 0)
		abort();
}

static unsigned count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	if (!d)
		abort();
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static int close_err;

static void on_closed(void *arg, int err)
{
	check(*(volatile int *)arg == 0); /* once */
	*(volatile int *)arg = 1;
	close_err = err;
}

/* What the client was sent: its length and how often each byte value
 * came.  Not the order: replies go out in completion order, and whether
 * a rejected request's reply passes a write's depends on how the write's
 * payload came in (the seed pipe_reply_order). */
static uint64_t reply_len, reply_hist[256];

static void drain(int fd)
{
	static uint8_t sink[65536];
	ssize_t n;

	while ((n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0) {
		if ((size_t)n <= REPLY_BYTES - reply_kept) {
			memcpy(reply_data + reply_kept, sink, (size_t)n);
			reply_kept += (size_t)n;
		} else {
			reply_kept = REPLY_BYTES + 1; /* too much to check */
		}
		reply_len += (size_t)n;
		for (ssize_t i = 0; i < n; i++)
			reply_hist[sink[i]]++;
	}
}

/* One connection fed the whole input; false if the input is malformed.
 * splice_min: nbd_splice_set_min's (0: the default, UINT32_MAX: none). */
static bool run(const uint8_t *data, size_t size, uint32_t splice_min)
{
	struct nbd_conn *c;
	int sv[2];
	/* Set by on_closed from inside reactor_poll. */
	volatile int closed = 0;
	size_t off = 1;
	const uint8_t *sched = NULL;
	size_t nsched = 0, si = 0;
	bool hold = data[0] & 4, pipes = splice_min && splice_min != UINT32_MAX;

	if (hold) {
		if (size < 2 || (size_t)data[1] > size - 2)
			return false;
		nsched = data[1];
		sched = data + 2;
		off = 2 + nsched;
	}
	struct nbd_export *e = hold ? EH : E, **ex = hold ? EXH : EX;
	submitted = completed = 0;
	reply_len = reply_kept = 0;
	nr_expect = 0;
	expect_used = 0;
	expect_lost = false;
	memset(reply_hist, 0, sizeof(reply_hist));
	nbd_splice_set_min(splice_min);
	held_ops.pipe_writes = pipes;
	unsigned fds = count_fds(), toggle = 0;
	unsigned long pipes_open = pipe_sink_counted_open();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	int ret = (data[0] & 1) ?
			  nbd_conn_start_kernel(&R, &e[(data[0] >> 1) & 1], sv[1], on_closed, (void *)&closed, &c) :
			  nbd_conn_start_newstyle_tls(&R, ex, 2,
						      !(data[0] & 8) ? NULL :
						      (data[0] & 16) ? TLS_REQ : TLS_ON,
						      sv[1], "fuzz", on_closed, (void *)&closed, &c);
	if (ret < 0)
		abort();
	for (unsigned spins = 0; off < size; spins++) {
		ssize_t n = send(sv[0], data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno != EAGAIN)
			break; /* the server closed: the rest is never read */
		reactor_poll(&R, 0);
		drain(sv[0]);
		if (nsched)
			schedule_step(sched[si++ % nsched]);
		else if (hold && nr_held)
			schedule_step(pipes ? 3 | 8 : 3); /* no schedule: complete at once */
		if (spins > 1000000)
			abort(); /* the server stopped reading for good */
	}
	shutdown(sv[0], SHUT_WR);
	for (unsigned spins = 0, idle = 0; !closed; spins++) {
		reactor_poll(&R, 0);
		drain(sv[0]);
		/* The schedule goes on, but a held I/O is released after a few
		 * idle rounds: the volume below must complete what it took. */
		if (nr_held && !(nsched && schedule_step(sched[si++ % nsched])) && ++idle > 4) {
			release(0, false, toggle++ & 1);
			idle = 0;
		}
		if (spins > 1000000)
			abort(); /* the connection never ended */
	}
	/* Closed: nothing of it may still be held or unanswered below. */
	check(nr_held == 0);
	check(completed == submitted);
	for (int i = 0; i < 8; i++)
		reactor_poll(&R, 0); /* callbacks deferred by release */
	if (hold) {
		static struct vol_stats_snap snap;
		check(vol_stats_snapshot(VH, &snap) == 0 && snap.in_flight == 0);
	}
	drain(sv[0]); /* the replies sent after the last poll */
	if (!(data[0] & 8) && close_err == 0 && !expect_lost && reply_kept <= REPLY_BYTES)
		for (unsigned i = 0; i < nr_expect; i++)
			check(expect[i].len == 0 ||
			      memmem(reply_data, reply_kept, expect_data + expect[i].at, expect[i].len));
	close(sv[0]);
	/* Every pipe and socket of the connection is closed. */
	check(pipe_sink_counted_open() == pipes_open);
	check(count_fds() == fds);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t before[VOL_SIZE], after[VOL_SIZE];

	init_once();
	if (size < 1)
		return 0;
	/* With pipes, the RAM volume without holds (a schedule would release
	 * other I/O at other rounds) and without TLS (no pipes there) must
	 * end the same as without them: the same bytes written, and when
	 * both connections end with an orderly NBD_CMD_DISC the same bytes
	 * sent to the client, in any order (on a protocol error, the replies that went out
	 * before it depend on when completions ran). */
	bool pipes = data[0] & 32, twice = pipes && !(data[0] & (4 | 8));
	if (twice)
		memcpy(before, vol_mem_data(V), VOL_SIZE);
	if (!run(data, size, pipes ? 512 : 0) || !twice)
		return 0;
	static uint64_t hist[256];
	uint64_t len = reply_len;
	memcpy(hist, reply_hist, sizeof(hist));
	int err = close_err;
	memcpy(after, vol_mem_data(V), VOL_SIZE);
	memcpy(vol_mem_data(V), before, VOL_SIZE);
	run(data, size, UINT32_MAX); /* no pipes at all, even at 64 KiB */
	check(memcmp(vol_mem_data(V), after, VOL_SIZE) == 0);
	if (!err && !close_err)
		check(reply_len == len && memcmp(reply_hist, hist, sizeof(hist)) == 0);
	return 0;
}
