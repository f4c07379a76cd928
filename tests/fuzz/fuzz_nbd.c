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
 * When bit 3 of the first byte is set, the listener has TLS with a PSK
 * (bit 4: tls = require, else on): NBD_OPT_STARTTLS, the refusals before
 * it and OpenSSL's handshake on memory BIOs see the input too (a real
 * ClientHello is among the seeds; the handshake cannot finish, so the
 * options inside TLS are reached only by the functional tests). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "gateway/base/reactor.h"
#include "gateway/volume/volume.h"
#include "nbd/nbd.h"

#include "tests/fuzz/fuzz_check.h"

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

static void held_submit(struct volume *v, struct vol_io *io)
{
	(void)v;
	for (unsigned i = 0; i < nr_held; i++)
		check(held[i] != io); /* submitted again while in flight */
	check(nr_held < HELD_MAX);
	held[nr_held++] = io;
	submitted++;
}

/* Completes held[i]: through the RAM volume (its data, its status), or
 * with an error.  Either way the callback runs later, from the reactor. */
static void release(unsigned i, bool fail)
{
	struct vol_io *io = held[i];

	held[i] = held[--nr_held];
	completed++;
	if (fail)
		vol_complete(&R, io, -EIO);
	else
		mem_ops->submit(VH, io);
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
		release((s >> 2) % nr_held, (s & 3) == 2);
		return true;
	default: /* all of them, last first */
		while (nr_held)
			release(nr_held - 1, s & 4);
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
	if (reactor_init(&R, 0, 256) < 0 ||
	    vol_mem_create("fuzz", 1 << 20, 512,
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
}

static void on_closed(void *arg, int err)
{
	(void)err;
	check(*(volatile int *)arg == 0); /* once */
	*(volatile int *)arg = 1;
}

static void drain(int fd)
{
	static uint8_t sink[65536];
	while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nbd_conn *c;
	int sv[2];
	/* Set by on_closed from inside reactor_poll. */
	volatile int closed = 0;
	size_t off = 1;
	const uint8_t *sched = NULL;
	size_t nsched = 0, si = 0;

	init_once();
	if (size < 1)
		return 0;
	bool hold = data[0] & 4;
	if (hold) {
		if (size < 2 || (size_t)data[1] > size - 2)
			return 0;
		nsched = data[1];
		sched = data + 2;
		off = 2 + nsched;
	}
	struct nbd_export *e = hold ? EH : E, **ex = hold ? EXH : EX;
	submitted = completed = 0;
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
			schedule_step(3); /* no schedule: complete at once */
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
			release(0, false);
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
	close(sv[0]);
	return 0;
}
