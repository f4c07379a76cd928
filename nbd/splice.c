/* READ replies out of a pipe: the transport splices a large read's payload
 * into a pipe that already holds the reply header, and the connection
 * splices the lot to its socket.  The gateway then never copies the bytes:
 * for the kernel's /dev/nbdN the payload goes from the NVMe/TCP socket to
 * the NBD socket as page references, and the kernel copies it once, into
 * the bio, as its own NVMe/TCP host does.
 *
 * A connection uses pipes only when its socket can be made O_NONBLOCK
 * (the send must not block the reactor), it has no TLS, and SIGPIPE is
 * ignored (splice cannot say MSG_NOSIGNAL).  When the transport declines
 * (RDMA, digests, a RAM volume) the reply goes from the buffer as before;
 * a connection that keeps being declined stops asking for a while.
 *
 * Not to a TCP client on this host (gw_peer_is_local): there the client
 * receives the gateway's very socket buffers, and a spliced reply costs
 * the machine more than a copied one (tests/bench/run, NBD/TCP with 4
 * connections, 2026-12-06: spliced replies ran 0.68-1.02x the MiB/s of
 * copied ones in nine runs, 0.68-0.77x in the four that compared them as
 * they now differ, at 1.24-1.52x all CPUs' time per MiB and 1.09-1.26x
 * the gateway's own).  Over a NIC the client never sees those buffers and
 * the splice spares the gateway its copy; a Unix socket client gains from
 * it here (the bench's 1 MiB and 128K rows).
 * NVMF_GATEWAY_SPLICE_READS=all splices to local TCP clients too, =none
 * to nobody. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/access.h"
#include "gateway/base/invariant.h"
#include "gateway/base/log.h"
#include "nbd/internal.h"

/* Declined this many times in a row: skip the next SKIP large reads. */
#define SPLICE_MISS_LIMIT 8u
#define SPLICE_SKIP 256u

/* Requests from this size up may use a pipe: NBD_SPLICE_MIN, or what a
 * test set (nbd_splice_set_min). */
static uint32_t splice_min = NBD_SPLICE_MIN;

void nbd_splice_set_min(uint32_t bytes)
{
	__atomic_store_n(&splice_min, bytes ? bytes : NBD_SPLICE_MIN, __ATOMIC_RELAXED);
}

static uint32_t splice_min_get(void)
{
	return __atomic_load_n(&splice_min, __ATOMIC_RELAXED);
}

/* One more miss in a row; at the limit the next SPLICE_SKIP requests go
 * without a pipe. */
static void count_miss(unsigned *misses, unsigned *skip)
{
	if (++*misses >= SPLICE_MISS_LIMIT) {
		*misses = 0;
		*skip = SPLICE_SKIP;
	}
}

/* The overrides NVMF_GATEWAY_SPLICE_READS and _WRITES: "all", "none", or
 * anything else for the default; read once per process into *cache
 * (which starts at -1). */
enum splice_mode { SPLICE_NONE, SPLICE_DEFAULT, SPLICE_ALL };

static enum splice_mode splice_mode_env(const char *name, int *cache)
{
	int m = __atomic_load_n(cache, __ATOMIC_RELAXED);

	if (m < 0) {
		const char *e = getenv(name);

		m = SPLICE_DEFAULT;
		if (e && !strcmp(e, "all"))
			m = SPLICE_ALL;
		else if (e && !strcmp(e, "none"))
			m = SPLICE_NONE;
		__atomic_store_n(cache, m, __ATOMIC_RELAXED);
	}
	return (enum splice_mode)m;
}

/* Whether READ replies go out of pipes on a connection that can use them:
 * NVMF_GATEWAY_SPLICE_READS (see the top of this file). */
static bool reads_through_pipes(struct nbd_conn *c)
{
	static int cache = -1;
	enum splice_mode m = splice_mode_env("NVMF_GATEWAY_SPLICE_READS", &cache);

	if (m != SPLICE_DEFAULT)
		return m == SPLICE_ALL;
	if (!c->kernel && gw_peer_is_local(c->fd)) {
		log_debug("nbd %s: a TCP client on this host: read replies from memory", c->peer);
		return false;
	}
	return true;
}

/* Decided once per connection, at its first large read. */
static bool conn_can_splice(struct nbd_conn *c)
{
	struct sigaction sa;
	int fl;

	if (c->splice_tried)
		return c->splice_ok;
	c->splice_tried = true;
	c->splice_ok = false;
	if (pipe_sink_disabled() || c->tls || c->tls_cfg || !reactor_nonblock_fd_ok(c->r))
		return false;
	if (sigaction(SIGPIPE, NULL, &sa) < 0 || sa.sa_handler != SIG_IGN) {
		log_debug("nbd %s: SIGPIPE is not ignored: no pipes", c->peer);
		return false;
	}
	fl = fcntl(c->fd, F_GETFL);
	if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0))
		return false;
	c->pipes = calloc(NBD_SPLICE_PIPES, sizeof(*c->pipes));
	if (!c->pipes)
		return false;
	for (unsigned i = 0; i < NBD_SPLICE_PIPES; i++)
		c->pipes[i].rfd = c->pipes[i].wfd = -1;
	c->splice_ok = true;
	c->splice_reads = reads_through_pipes(c);
	log_debug("nbd %s: large %s go through pipes", c->peer,
		  c->splice_reads ? "reads and writes" : "writes");
	return true;
}

/* Once per process: a pipe below NBD_SPLICE_PIPE_SIZE leaves the largest
 * requests to the copies, which an operator would want to know. */
static void warn_small_pipe(uint32_t cap)
{
	static bool told;

	if (cap >= NBD_SPLICE_PIPE_SIZE || __atomic_exchange_n(&told, true, __ATOMIC_RELAXED))
		return;
	log_info("nbd: pipes are %u KiB here (fs.pipe-max-size, lifted by CAP_SYS_RESOURCE): "
		 "requests above %u KiB are copied, not spliced",
		 cap / 1024, cap > 2 * 4096u ? (cap - 2 * 4096u) / 1024 : 0);
}

static struct pipe_sink *pipe_take(struct nbd_conn *c)
{
	if (c->nr_pipe_free)
		return c->pipe_free[--c->nr_pipe_free];
	for (unsigned i = 0; i < NBD_SPLICE_PIPES; i++) {
		struct pipe_sink *s = &c->pipes[i];
		if (pipe_sink_is_open(s))
			continue;
		/* Over the budget: this request goes the usual way. */
		int ret = pipe_sink_open_counted(s, NBD_SPLICE_PIPE_SIZE);
		if (ret < 0) {
			if (ret != -EMFILE)
				log_debug("nbd %s: pipe: %s", c->peer, strerror(-ret));
			return NULL;
		}
		warn_small_pipe(s->cap);
		return s;
	}
	return NULL; /* all in use */
}

static void pipe_give(struct nbd_conn *c, struct pipe_sink *s)
{
	if (c->state < NBD_CONN_CLOSING && !s->broken && pipe_sink_empty(s) == 0) {
		INVARIANT(c->nr_pipe_free < NBD_SPLICE_PIPES, "more free pipes than pipes");
		c->pipe_free[c->nr_pipe_free++] = s;
		return;
	}
	pipe_sink_close_counted(s);
	s->broken = false;
}

void nbd_splice_prepare(struct nbd_conn *c, struct nbd_req *q)
{
	struct pipe_sink *s;

	if (q->type == NBD_CMD_WRITE) {
		/* Its payload came whole into the pipe (else sink is NULL). */
		if (q->sink)
			q->io.sink = q->sink;
		return;
	}
	if (q->type != NBD_CMD_READ || q->length < splice_min_get() || !conn_can_splice(c) ||
	    !c->splice_reads)
		return;
	if (c->splice_skip) {
		c->splice_skip--;
		return;
	}
	if (!(s = pipe_take(c)))
		return;
	/* Room for the payload in whole pages plus the header's page. */
	if (s->cap < 2 * 4096u || q->length > s->cap - 2 * 4096u) {
		pipe_give(c, s);
		return;
	}
	q->err = 0;
	nbd_encode_reply(c, q);
	if (pipe_sink_set_prefix(s, q->hdr, q->hdr_len) < 0) {
		pipe_give(c, s);
		return;
	}
	q->sink = s;
	q->io.sink = s;
}

/* Write payloads through pipes: for the kernel's /dev/nbdN by default,
 * where it was measured a gain (TCG guest, 128K writes QD8: 0.34-0.39 of
 * the kernel host before, 0.59-0.74 with), not for socket clients, where
 * it was measured a loss (this host, fio's nbd engine over a Unix socket:
 * 0.70x the MiB/s at 1.65x the gateway's CPU per MiB, more wakeups).
 * NVMF_GATEWAY_SPLICE_WRITES=all or =none overrides. */
static bool writes_through_pipes(const struct nbd_conn *c)
{
	static int cache = -1;
	enum splice_mode m = splice_mode_env("NVMF_GATEWAY_SPLICE_WRITES", &cache);

	return m == SPLICE_ALL || (m == SPLICE_DEFAULT && c->kernel);
}

void nbd_splice_prepare_write(struct nbd_conn *c, struct nbd_req *q)
{
	struct pipe_sink *s;

	c->rx_hdr_only = false;
	if (q->type != NBD_CMD_WRITE || q->length < splice_min_get() || !writes_through_pipes(c) ||
	    !conn_can_splice(c))
		return;
	if (c->wsplice_skip) {
		c->wsplice_skip--;
		return;
	}
	if (!(s = pipe_take(c)))
		return;
	/* Pages may be partly filled: room for two more than the payload. */
	if (s->cap < 2 * 4096u || q->length > s->cap - 2 * 4096u) {
		pipe_give(c, s);
		return;
	}
	q->sink = s;
	c->rx_hdr_only = true;
}

/* The pipe is given up: what it holds goes into the buffer, where the
 * rest of the payload follows. */
static int write_give_up(struct nbd_conn *c, struct nbd_req *q, int why)
{
	struct pipe_sink *s = q->sink;
	struct iovec iov = { q->buf, q->length };

	log_debug("nbd %s: write at %llu: %zu of %llu bytes in its pipe, the rest to the buffer: "
		  "%s",
		  c->peer, (unsigned long long)q->offset, c->cur_got,
		  (unsigned long long)q->length,
		  why == -ENOSPC ? "the pipe is full" :
		  why == -EAGAIN ? "nothing to read after a poll" : strerror(-why));
	q->sink = NULL;
	c->rx_hdr_only = false;
	c->nr_wr_unspliced++;
	/* A pipe that fills (small frames fill its slots before its bytes)
	 * will fill again for the next writes: count it as a miss. */
	if (why != -EAGAIN)
		count_miss(&c->wsplice_misses, &c->wsplice_skip);
	if (s->broken || s->filled != c->cur_got || pipe_sink_unsplice(s, &iov, 1) < 0) {
		pipe_give(c, s);
		nbd_conn_fail(c, -EIO, "write at %llu: its payload is lost: a pipe failed",
			      (unsigned long long)q->offset);
		return -1;
	}
	pipe_give(c, s);
	return 0;
}

int nbd_splice_rx_put(struct nbd_conn *c, const uint8_t *p, size_t n)
{
	struct nbd_req *q = c->cur;
	uint32_t before = q->sink->filled;
	int ret = pipe_sink_put(q->sink, p, n);

	c->cur_got += q->sink->filled - before;
	c->rx_head += q->sink->filled - before;
	if (ret == 0)
		return 1;
	return write_give_up(c, q, ret) < 0 ? -1 : 0;
}

int nbd_splice_rx(struct nbd_conn *c, bool after_poll)
{
	struct nbd_req *q = c->cur;

	while (c->cur_got < q->length) {
		/* conn_can_splice made the socket O_NONBLOCK. */
		ssize_t n = pipe_sink_from_nb_socket(q->sink, c->fd, q->length - c->cur_got);
		c->nr_wr_splice_calls++;
		if (n == -EAGAIN && !after_poll)
			return 1;
		if (n < 0)
			return write_give_up(c, q, (int)n) < 0 ? -1 : 0;
		after_poll = false;
		c->cur_got += (size_t)n;
	}
	return 0;
}

void nbd_splice_settle(struct nbd_conn *c, struct nbd_req *q, int *err)
{
	struct pipe_sink *s = q->sink;

	if (!s)
		return;
	if (q->type == NBD_CMD_WRITE) {
		/* The volume is done with the payload: the pipe's pages go.
		 * Still there: it went out of the pipe.  Gone: a layer below
		 * took it out into the buffer, which cost a copy more than
		 * receiving it there; a connection where that keeps happening
		 * stops using pipes for writes for a while. */
		q->io.sink = NULL;
		q->sink = NULL;
		if (*err) {
			/* Says nothing about where its payload went. */
		} else if (s->filled) {
			c->nr_wr_spliced++;
			c->wsplice_misses = 0;
		} else {
			c->nr_wr_taken_out++;
			count_miss(&c->wsplice_misses, &c->wsplice_skip);
		}
		pipe_give(c, s);
		return;
	}
	q->io.sink = NULL;
	if (!*err && !s->broken && s->filled == q->length) {
		q->spliced = true;
		c->splice_misses = 0;
		c->nr_spliced++;
		return;
	}
	if (!*err && !s->broken && s->filled) {
		/* The volume must leave the payload wholly in one place. */
		INVARIANT(false, "a read's payload split between pipe and buffer");
		log_err("nbd %s: read at %llu: %u of %llu bytes left in a pipe", c->peer,
			(unsigned long long)q->offset, s->filled, (unsigned long long)q->length);
		*err = -EIO;
	}
	if (!*err) {
		c->nr_splice_missed++;
		count_miss(&c->splice_misses, &c->splice_skip);
	}
	q->sink = NULL;
	pipe_give(c, s);
}

void nbd_splice_release(struct nbd_conn *c, struct nbd_req *q)
{
	if (!q->sink)
		return;
	q->io.sink = NULL;
	pipe_give(c, q->sink);
	q->sink = NULL;
	q->spliced = false;
}

void nbd_splice_free_all(struct nbd_conn *c)
{
	if (c->nr_spliced || c->nr_splice_missed)
		log_debug("nbd %s: %llu read replies spliced, %llu not", c->peer,
			  (unsigned long long)c->nr_spliced,
			  (unsigned long long)c->nr_splice_missed);
	if (c->nr_wr_spliced || c->nr_wr_taken_out || c->nr_wr_unspliced)
		log_debug("nbd %s: %llu write payloads spliced, %llu taken out of their pipe, "
			  "%llu given up; %llu splices from the socket, %llu polls",
			  c->peer, (unsigned long long)c->nr_wr_spliced,
			  (unsigned long long)c->nr_wr_taken_out,
			  (unsigned long long)c->nr_wr_unspliced,
			  (unsigned long long)c->nr_wr_splice_calls,
			  (unsigned long long)c->nr_wr_polls);
	if (!c->pipes)
		return;
	for (unsigned i = 0; i < NBD_SPLICE_PIPES; i++)
		pipe_sink_close_counted(&c->pipes[i]);
	free(c->pipes);
	c->pipes = NULL;
	c->nr_pipe_free = 0;
}
