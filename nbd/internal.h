/* Internals shared by the NBD server's files: the connection, its
 * request pool, the limits that keep a hostile client small. */
#ifndef NBD_INTERNAL_H
#define NBD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "gateway/base/list.h"
#include "gateway/base/reactor.h"
#include "gateway/volume/volume.h"
#include "nbd/nbd.h"
#include "nbd/proto.h"

/* Requests in flight per connection: enough for QD 128 from one client. */
#define NBD_MAX_INFLIGHT 128
#define NBD_RXBUF_SIZE (64u * 1024)
/* Handshake caps: a client gets this many options, each with at most
 * NBD_MAX_OPT_LEN bytes of data read; up to NBD_MAX_OPT_SKIP more bytes
 * are skipped (NBD_REP_ERR_TOO_BIG), anything longer closes. */
#define NBD_MAX_OPTS 64
#define NBD_MAX_OPT_LEN (8u * 1024)
#define NBD_MAX_OPT_SKIP (1u << 20)
#define NBD_MAX_STRING 4096
/* Data buffers a connection may hold at once come from the process's
 * budget (gateway/base/membudget.h); this is the largest request it must fit. */
#define NBD_MAX_REQ_BUF (32u << 20)
/* A connection waiting for the budget looks again this often. */
#define NBD_BUDGET_POLL_NS (5 * NSEC_PER_MSEC)
/* And one whose volume's I/O waits for a path and holds its share of the
 * budget (membudget_path_wait_over): an outage lasts seconds at least. */
#define NBD_PATH_WAIT_POLL_NS (100 * NSEC_PER_MSEC)
/* Held buffers are looked at this often: an idle connection gives its
 * cached buffers back, a stalled one may be cut off. */
#define NBD_HOUSEKEEP_NS (500 * NSEC_PER_MSEC)
/* Progress, for the stall rule, is this many bytes of a reply batch or of
 * a write's payload (or the end of it): a client that takes one byte
 * every stall_timeout - 1 s is as stalled as one that takes none, and
 * held its 32 MiB for days.  1 MiB in the default 30 s is 35 KB/s. */
#define NBD_STALL_MIN_BYTES (1u << 20)
/* An oversized write payload up to this is read and dropped (EINVAL
 * reply); a longer one closes the connection. */
#define NBD_MAX_SKIP (64ull << 20)
#define NBD_HANDSHAKE_TIMEOUT_NS (30 * NSEC_PER_SEC)
#define NBD_DRAIN_TIMEOUT_NS (30 * NSEC_PER_SEC)
#define NBD_LAST_WORDS_TIMEOUT_NS (5 * NSEC_PER_SEC) /* a TLS alert behind a send */
/* Replies gathered into one sendmsg. */
#define NBD_TX_BATCH 64
#define NBD_TX_BATCH_BYTES (512u * 1024)
/* Reads from this size up go out of a pipe the transport splices their
 * payload into (nbd/splice.c): below it two copies cost less than the
 * pipe's system calls.  The default; tests lower it (nbd_splice_set_min). */
#define NBD_SPLICE_MIN (64u * 1024)
#define NBD_SPLICE_PIPES 16u /* per connection, opened as needed */
/* A 1 MiB read and its header: 2 MiB (root; others get pipe-max-size). */
#define NBD_SPLICE_PIPE_SIZE (2u << 20)
/* Requests started per connection before going back to the ring. */
#define NBD_RX_BURST 16

enum nbd_conn_state {
	NBD_CONN_NEW,
	NBD_CONN_GREETING, /* greeting sent, waiting for the client flags */
	NBD_CONN_OPTIONS, /* option haggling */
	NBD_CONN_TLS, /* STARTTLS acknowledged: the TLS handshake, then options again */
	NBD_CONN_TRANSMISSION,
	NBD_CONN_DRAINING, /* no more requests: finish, answer, then close */
	NBD_CONN_CLOSING, /* socket shut: waiting for I/O and ring ops */
	NBD_CONN_CLOSED,
};

enum nbd_rx_want {
	RX_CLIENT_FLAGS,
	RX_OPT_HDR,
	RX_OPT_DATA,
	RX_REQ_HDR,
	RX_WRITE_DATA,
	RX_SKIP, /* payload to drop, then reply to conn->cur */
	RX_NONE, /* nothing more is read */
};

struct nbd_conn;

/* Where a request's time goes inside the gateway (issue 20: on a busy
 * host the two legs in series lose more than either alone, and only the
 * gateway's own clock can say between which steps).  A stage starts at
 * its stamp and ends at the next one: */
enum nbd_stage {
	NBD_STAGE_RECEIVE, /* header parsed: the buffer budget, a pipe, a
			    * write's payload (not the wait in the socket
			    * before the header was read) */
	NBD_STAGE_VOLUME, /* handed to the volume (the NVMe-oF leg) */
	NBD_STAGE_QUEUED, /* answered: waits behind the send in flight */
	NBD_STAGE_SEND, /* in a send until the socket took all of it and the
			 * reactor saw that (its completion, or a pipe's
			 * deferred end) */
	NBD_STAGES,
};

/* Per connection, for reads and for writes: the stages' sums and worst
 * cases over the requests answered whole.  Logged when it closes. */
struct nbd_stage_sum {
	uint64_t n;
	uint64_t ns[NBD_STAGES], max_ns[NBD_STAGES];
};

struct nbd_req {
	struct list_node link; /* free, replyq or sending */
	struct nbd_conn *c;
	struct vol_io io;
	uint64_t cookie, offset, length;
	uint16_t type, flags;
	int err; /* 0 or -errno */
	uint64_t loss_upto; /* a FLUSH's EIO told its session of losses up to this */
	bool err_at_offset; /* the volume failed it: ERROR_OFFSET */
	const char *msg; /* why, for structured error chunks */
	uint8_t *buf;
	size_t cap;
	struct iovec iov;
	/* The reply's header (and chunk head), then data_len bytes of buf. */
	uint8_t hdr[128];
	unsigned hdr_len;
	size_t data_len;
	/* A READ's pipe, holding its reply header from the start; spliced:
	 * the payload is there too and the reply goes out of the pipe.
	 * A WRITE's pipe: its payload is spliced there from the socket (and
	 * is there, not in buf, while sink->filled counts it). */
	struct pipe_sink *sink;
	bool spliced;
	uint64_t t[NBD_STAGES]; /* when each stage began, 0 if it did not */
};

struct nbd_server;

struct nbd_conn {
	struct reactor *r;
	int fd;
	char peer[96];
	enum nbd_conn_state state;
	bool kernel;
	struct nbd_export *const *exports;
	unsigned nr_exports;
	struct nbd_export *e; /* chosen export (transmission) */
	/* Of e->vol's write losses (vol_note_loss): the cursor the session
	 * started with, its own, and the one its flushes use (its own, or
	 * the kernel device's shared by all its sockets). */
	uint64_t loss_start, loss_seen, *loss_cursor;
	uint64_t loss_sent; /* the losses an EIO reply that was sent whole told of */
	const struct nbd_tls *tls_cfg; /* NULL: TLS off */
	struct nbd_tls_conn *tls; /* after STARTTLS: every byte goes through it */
	bool tls_starting; /* STARTTLS acknowledged: TLS begins once it is sent */
	bool tls_insist;	/* STARTTLS refused by the handshake limit: plaintext options
			 * are refused from then on, as under tls = require */
	/* Holds one of the listener's handshake slots (tls_max_handshakes):
	 * from the STARTTLS ACK until the handshake ends or the connection. */
	bool tls_counted;
	uint16_t tflags; /* transmission flags sent to the client */
	bool structured, extended, no_zeroes;
	unsigned nr_opts;
	uint32_t opt, opt_len;

	/* Receive: [rx_head, rx_tail) of rx is read and not yet parsed. */
	uint8_t *rx;
	size_t rx_head, rx_tail;
	struct reactor_op rx_op, resume_op;
	bool rx_busy, rx_direct, resume_busy;
	/* rx_op is a poll: cur's write payload is to be spliced into its
	 * pipe once the socket has some. */
	bool rx_poll;
	/* The last header was a large write that went to a pipe: the next
	 * receive asks for one header only, so that the next payload does
	 * not come in through rx (and get copied) but is spliced too. */
	bool rx_hdr_only;
	enum nbd_rx_want want;
	uint64_t skip_left;
	struct nbd_req *cur; /* the request whose payload is being read */
	size_t cur_got;
	struct nbd_req *pending; /* header parsed, waiting for a buffer */

	/* Send: one sendmsg in flight; handshake bytes first, then replies. */
	struct reactor_op tx_op;
	bool tx_busy;
	struct msghdr msg;
	struct iovec txv[2 * NBD_TX_BATCH + 1];
	unsigned txv_first, txv_cnt;
	uint8_t *hs;
	size_t hs_len, hs_cap, hs_in_tx;
	struct list_node sending;
	/* A spliced reply being sent (alone): splice_left bytes of its pipe. */
	struct nbd_req *tx_splice;
	size_t splice_left;
	struct reactor_msg splice_msg; /* its end, deferred (conn.c splice_sent) */

	/* nbd/splice.c: the pipes, opened as needed, and the free ones. */
	struct pipe_sink *pipes;
	struct pipe_sink *pipe_free[NBD_SPLICE_PIPES];
	unsigned nr_pipe_free;
	bool splice_tried, splice_ok;
	bool splice_reads; /* READ replies too (not to a TCP client on this host) */
	unsigned splice_misses, splice_skip;
	uint64_t nr_spliced, nr_splice_missed; /* replies, for the log */
	unsigned wsplice_misses, wsplice_skip; /* as splice_*, for writes */
	/* Write payloads: sent from the pipe, taken out of it below (RDMA,
	 * a RAM volume, split at MDTS), given up while being received. */
	uint64_t nr_wr_spliced, nr_wr_taken_out, nr_wr_unspliced;
	uint64_t nr_wr_splice_calls, nr_wr_polls; /* what receiving them took */
	/* How well the socket is batched both ways, for the log: requests
	 * per receive and replies per send batch (issue 20: a reactor that wakes
	 * for every request sends every reply alone). */
	uint64_t nr_rx_calls, nr_rx_reqs, nr_tx_calls, nr_tx_replies;
	struct nbd_stage_sum stages[2]; /* reads, writes */
	bool stamps; /* debug logging was on at its start: stages are timed */

	struct nbd_req *reqs;
	struct list_node free, replyq;
	unsigned inflight; /* volume I/O outstanding */
	size_t buf_bytes; /* held from the budget: in use and cached */
	uint64_t buf_cap; /* at most this much (membudget_conn_cap) */
	bool budget_wait; /* counted in the budget's waiters */
	bool path_wait; /* its volume's I/O waiting for a path holds its share */
	uint64_t buf_used_ns; /* a request last took a buffer (reactor_now_ns) */
	struct reactor_timer poll_timer, house_timer;
	/* Last time the client took NBD_STALL_MIN_BYTES of reply bytes (or a
	 * batch started), and what it took since. */
	uint64_t tx_progress_ns, tx_window;
	/* The same for a socket client's write payload (or its header). */
	uint64_t rx_progress_ns, rx_window;

	struct reactor_timer timer;
	uint64_t drain_ns; /* the drain's bound, armed on timer */
	int close_err;
	void (*closed)(void *arg, int err);
	void *closed_arg;

	struct nbd_server *srv;
	unsigned srv_idx; /* which of the server's reactors */
	struct list_node srv_link;
	struct reactor_msg arrive_msg;
	struct reactor_msg fin_msg, kick_msg;
	bool fin_queued, kick_queued;
};

/* Before a receive into rx: an empty buffer starts over; a tail too short
 * to be worth a read moves what is unparsed to the front. */
static inline void nbd_rx_compact(struct nbd_conn *c)
{
	if (c->rx_head == c->rx_tail) {
		c->rx_head = c->rx_tail = 0;
	} else if (c->rx_head && NBD_RXBUF_SIZE - c->rx_tail < 512) {
		memmove(c->rx, c->rx + c->rx_head, c->rx_tail - c->rx_head);
		c->rx_tail -= c->rx_head;
		c->rx_head = 0;
	}
}

/* stages.c */
static inline void nbd_stage_mark(struct nbd_conn *c, struct nbd_req *q, enum nbd_stage s)
{
	if (c->stamps)
		q->t[s] = reactor_now_ns();
}
/* Adds one request that went out whole at `now`: a stage it skipped (a
 * reply without the volume) takes no time.  Stamps out of order (a clock
 * that went back) count as zero, never as a wrapped sum. */
void nbd_stage_add(struct nbd_stage_sum *sum, const uint64_t t[NBD_STAGES], uint64_t now);
/* The sums of a closing connection, one debug line per kind. */
void nbd_stage_log(const struct nbd_conn *c);

/* conn.c */
struct nbd_conn *nbd_conn_alloc(int fd, const char *peer);
void nbd_conn_free_unstarted(struct nbd_conn *c);
/* Starts the connection on its reactor (the caller's thread is c->r). */
void nbd_conn_run(struct nbd_conn *c);
bool nbd_conn_set_state(struct nbd_conn *c, enum nbd_conn_state to);
/* Hard close: logs reason once, shuts the socket, waits for I/O. */
void nbd_conn_fail(struct nbd_conn *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Soft close: stop reading, answer what is in flight, then close. */
void nbd_conn_drain(struct nbd_conn *c, int err, const char *why);
/* A failure (logged as nbd_conn_fail logs it) whose last bytes must still
 * reach the client (a TLS alert behind a send in flight): reading stops,
 * what is queued is sent, then the close; within NBD_LAST_WORDS_TIMEOUT_NS. */
void nbd_conn_fail_after_send(struct nbd_conn *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int nbd_conn_hs_put(struct nbd_conn *c, const void *p, size_t n);
void nbd_conn_tx_kick(struct nbd_conn *c);
void nbd_conn_tx_kick_later(struct nbd_conn *c);
void nbd_conn_rx_process(struct nbd_conn *c);
/* Ends a draining or closing connection once nothing is outstanding. */
void nbd_conn_maybe_finish(struct nbd_conn *c);
int nbd_conn_ensure_buf(struct nbd_conn *c, struct nbd_req *q, size_t len);
void nbd_req_put(struct nbd_conn *c, struct nbd_req *q);

/* handshake.c: 0 to go on parsing, < 0 when parsing must stop. */
void nbd_hs_start(struct nbd_conn *c);
int nbd_hs_client_flags(struct nbd_conn *c, const uint8_t *p);
int nbd_hs_opt_hdr(struct nbd_conn *c, const uint8_t *p);
int nbd_hs_opt_data(struct nbd_conn *c, const uint8_t *p);
void nbd_hs_opt_too_big(struct nbd_conn *c);
/* What NBD_INFO_BLOCK_SIZE says for v. */
void nbd_block_sizes(const struct volume *v, uint32_t *min, uint32_t *pref, uint32_t *max);

/* tls.c */
struct nbd_tls_conn;
/* At NBD_OPT_STARTTLS: takes a handshake slot of the listener, or
 * -EBUSY (logged) when tls_max_handshakes are in progress. */
int nbd_tls_slot_take(struct nbd_conn *c);
/* The STARTTLS ACK is sent: set up the session and start the handshake. */
void nbd_tls_begin(struct nbd_conn *c);
/* n bytes of ciphertext arrived in the connection's TLS receive buffer. */
void nbd_tls_rx_done(struct nbd_conn *c, size_t n);
/* Plaintext into rx (true: some came, parse on), else a receive armed. */
bool nbd_tls_rx_arm(struct nbd_conn *c);
/* Seals txv[0..n) (plaintext) plus anything TLS itself has to say into
 * one ciphertext iovec at txv[0]: 1, 0 if nothing to send, -1 failed. */
int nbd_tls_seal(struct nbd_conn *c, unsigned n);
/* The ciphertext is sent: seal the next part of the batch (as above). */
int nbd_tls_seal_more(struct nbd_conn *c);
void nbd_tls_conn_closing(struct nbd_conn *c);
void nbd_tls_conn_free(struct nbd_conn *c);
/* The connection is quiet (housekeep): the ciphertext buffers go back. */
void nbd_tls_idle(struct nbd_conn *c);
struct ssl_st;
/* Seals up to 256 KiB of v[*first..cnt) (advanced past what is sealed),
 * after what TLS itself has to say, with ssl (memory BIOs) into *buf,
 * grown to what that needs (a mapping of *cap bytes): the length, 0 if
 * nothing, -EPROTO
 * with *ssl_err (SSL_get_error's), -ENOMEM, -EIO.  seal_some's; tests
 * bound the buffer with it. */
ssize_t nbd_tls_seal_iov(struct ssl_st *ssl, struct iovec *v, unsigned *first, unsigned cnt,
			 uint8_t **buf, size_t *cap, int *ssl_err);
/* Before an orderly close outside transmission (the server stopping during
 * option haggling): close_notify, sent at once if nothing of ours is being
 * sent (bounded as an alert is).  Nothing without an established session. */
void nbd_tls_bye_now(struct nbd_conn *c);

/* transmit.c */
size_t nbd_req_hdr_size(const struct nbd_conn *c);
int nbd_tx_request(struct nbd_conn *c, const uint8_t *p);
void nbd_tx_payload_done(struct nbd_conn *c, struct nbd_req *q);
void nbd_tx_resume_pending(struct nbd_conn *c);
/* Encode q's reply into q->hdr (header, chunk head) and q->data_len. */
void nbd_encode_reply(const struct nbd_conn *c, struct nbd_req *q);
uint32_t nbd_errno_to_wire(int err);
uint16_t nbd_conn_tflags(const struct nbd_export *e, bool structured);

/* splice.c: READ replies out of a pipe (see NBD_SPLICE_MIN). */
/* Before a READ is submitted: gives q (and its vol_io) a pipe holding its
 * success reply header, when the read is large and the connection can. */
void nbd_splice_prepare(struct nbd_conn *c, struct nbd_req *q);
/* At the READ's completion: keeps the pipe when the payload is in it
 * (q->spliced), else gives it back.  *err becomes -EIO if the payload is in
 * neither the pipe nor the buffer (a broken promise of the volume). */
void nbd_splice_settle(struct nbd_conn *c, struct nbd_req *q, int *err);
/* q's pipe, if any, back to the pool (closed if it holds unsent bytes of
 * a connection that is closing, or failed). */
void nbd_splice_release(struct nbd_conn *c, struct nbd_req *q);
void nbd_splice_free_all(struct nbd_conn *c);
/* A large WRITE's header was accepted and its buffer is there: gives q a
 * pipe for its payload, when the connection can. */
void nbd_splice_prepare_write(struct nbd_conn *c, struct nbd_req *q);
/* Splices what the socket holds of cur's payload into its pipe.  1: the
 * socket is empty, poll for more; 0: receive on as usual (the payload is
 * whole, or it is going to the buffer now); -1: the connection failed.
 * after_poll: the socket was said to be readable, so finding it empty
 * means an end or an error the usual receive reports. */
int nbd_splice_rx(struct nbd_conn *c, bool after_poll);
/* n bytes of cur's payload that came in through rx go to its pipe; false
 * if the pipe was given up (its bytes are in the buffer, cur_got counts
 * them) and the rest goes to the buffer; -1 on a failed connection. */
int nbd_splice_rx_put(struct nbd_conn *c, const uint8_t *p, size_t n);

/* server.c */
void nbd_server_conn_closed(void *arg, int err);

#endif
