/* libFuzzer harness for the NBD server: the input is everything a client
 * sends, fed through a socketpair into a real connection (handshake and
 * transmission, or kernel mode when the first byte is odd) over a RAM
 * volume, while the harness reads every reply.  The connection must end
 * (EOF or protocol error) without a crash, a leak or a hang. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/log.h"
#include "gateway/reactor.h"
#include "gateway/volume.h"
#include "nbd/nbd.h"

static struct reactor R;
static struct volume *V;
static struct nbd_export E[2];
static struct nbd_export *EX[2];

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
}

static void on_closed(void *arg, int err)
{
	(void)err;
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

	init_once();
	if (size < 1)
		return 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	int ret = (data[0] & 1) ?
			  nbd_conn_start_kernel(&R, &E[(data[0] >> 1) & 1], sv[1], on_closed, (void *)&closed, &c) :
			  nbd_conn_start_newstyle(&R, EX, 2, sv[1], "fuzz", on_closed, (void *)&closed, &c);
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
		if (spins > 1000000)
			abort(); /* the server stopped reading for good */
	}
	shutdown(sv[0], SHUT_WR);
	for (unsigned spins = 0; !closed; spins++) {
		reactor_poll(&R, 0);
		drain(sv[0]);
		if (spins > 1000000)
			abort(); /* the connection never ended */
	}
	close(sv[0]);
	return 0;
}
