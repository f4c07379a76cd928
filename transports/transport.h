/* The contract between the NVMe-oF host core and a fabric transport.
 *
 * The core builds SQEs, owns the request pools and the queue state; a
 * transport moves capsules and data over its fabric.  The core never
 * touches a socket or a verb; a transport never decides what a completion
 * means.  TCP and RDMA each fill one struct nvmf_transport_ops. */
#ifndef TRANSPORTS_TRANSPORT_H
#define TRANSPORTS_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "gateway/base/list.h"
#include "gateway/base/pipe_sink.h"
#include "gateway/base/reactor.h"
#include "transports/auth/tls_psk.h"
#include "transports/nvme_spec.h"

struct nvmf_queue;
struct nvmf_req;

enum nvmf_trtype { NVMF_TR_TCP, NVMF_TR_RDMA };

/* Where and how to reach one path of a controller. */
struct nvmf_path_opts {
	enum nvmf_trtype trtype;
	char traddr[256];
	char trsvcid[32];
	char host_traddr[256]; /* optional local address */
	char host_iface[32]; /* optional local interface */
	int tos; /* -1 = leave the socket's default */
	bool hdr_digest;
	bool data_digest;
	unsigned connect_timeout_ms;
	/* NVMe/TCP TLS 1.3 with a configured PSK: the handshake's identity and
	 * PSK are derived from tls_key with the controller's host and
	 * subsystem NQNs (identity version 0, the one nvmet 6.12 looks up). */
	bool tls;
	uint8_t tls_kdf; /* enum nvmf_tls_kdf */
	struct nvmf_tls_key tls_key;
};

/* Data for a request: caller-owned memory, valid until completion. */
#define NVMF_REQ_MAX_IOV 16

typedef void (*nvmf_req_done_fn)(struct nvmf_req *req, int err);

struct nvmf_req {
	struct list_node link; /* free, waiting, or in flight */
	struct nvmf_queue *q;
	struct nvme_sqe sqe;
	struct nvme_cqe cqe; /* filled before done() runs */
	uint16_t cid; /* index | generation << NVMF_CID_GEN_SHIFT */
	bool in_flight;
	bool host_to_ctrl; /* data direction: write-like */
	bool no_timeout; /* an Asynchronous Event Request waits as long as it likes */
	bool abort_sent; /* timed out once: an Abort was asked for */
	/* Its own io_timeout expired (an Abort sent, or its connection closed
	 * for it): when the transport then loses it, the loss is its own,
	 * not that of a command whose connection another one took down. */
	bool timed_out;
	uint32_t data_len;
	unsigned iovcnt;
	struct iovec iov[NVMF_REQ_MAX_IOV];
	/* A read's payload may go here instead of iov (pipe_sink.h): the
	 * transport may use it or not, and sets it to NULL when it gives up.
	 * A write's payload is there when sink->filled == data_len (only
	 * with ops->pipe_writes): the transport sends it from the pipe, or
	 * takes it out into iov before it uses iov.
	 * sink_off: where this command's data starts in the pipe's stream (a
	 * read split at MDTS: each command appends its part only when the
	 * pipe holds exactly the parts before it, see transports/io.c). */
	struct pipe_sink *sink;
	uint32_t sink_off;
	uint64_t submit_ns;
	struct nvme_dsm_range dsm; /* Dataset Management payload */
	/* err: 0 when a CQE arrived (its status may still be an error), or
	 * -errno when the transport lost the command. */
	nvmf_req_done_fn done;
	void *ctx;
	void *ctx2;
	/* Transport private state follows, ops->req_priv_size bytes. */
	_Alignas(16) unsigned char tp[];
};

#define NVMF_CID_IDX_BITS 12
#define NVMF_CID_IDX_MASK ((1u << NVMF_CID_IDX_BITS) - 1)
#define NVMF_QUEUE_MAX_SIZE (1u << NVMF_CID_IDX_BITS)
/* Admin queue requests kept for the AER, the namespace change handling and
 * the ANA log read (each has at most one command out). */
#define NVMF_ADMIN_RESERVED 3u

enum nvmf_queue_state {
	NVMF_Q_IDLE, /* created, no connection */
	NVMF_Q_CONNECTING, /* transport connecting (TCP + ICReq) */
	NVMF_Q_FABRIC_CONNECT, /* transport up, Fabrics Connect in flight */
	NVMF_Q_LIVE,
	NVMF_Q_DRAINING, /* error: waiting for the transport to quiesce */
	NVMF_Q_DEAD,
};

typedef void (*nvmf_queue_cb)(struct nvmf_queue *q, int err);

struct nvmf_queue {
	const struct nvmf_transport_ops *ops;
	void *tp; /* transport state */
	struct reactor *r;
	struct nvmf_ctrl *ctrl;
	char name[96]; /* log prefix: "ctrl NAME q3" */
	uint16_t qid;
	uint16_t size; /* entries; at most size - 1 in flight */
	enum nvmf_queue_state state;
	int error; /* first error that took the queue down */
	unsigned in_capsule_max; /* bytes of data a command capsule may carry */
	unsigned req_stride;
	unsigned char *req_mem;
	struct nvmf_req **by_idx;
	struct list_node free_reqs;
	unsigned nr_free;
	/* Free requests only nvmf_req_get_reserved may take: an admin queue
	 * keeps them for the Asynchronous Event Request and the namespace
	 * change handling, which must never find the queue full. */
	unsigned reserved;
	struct list_node in_flight;
	unsigned nr_in_flight;
	/* Callers waiting for a free request (struct nvmf_waiter), first
	 * come first served; waking: the one whose fn runs now. */
	struct list_node waiters;
	struct nvmf_waiter *waking;
	struct reactor_msg wake_msg;
	bool wake_pending;
	struct reactor_timer io_timer; /* oldest in-flight command's deadline */
	unsigned io_timeout_ms;
	struct nvmf_connect_data *connect_data;
	nvmf_queue_cb connect_cb;
	nvmf_queue_cb down_cb; /* the queue left LIVE */
	/* Statistics, updated on the owning reactor only. */
	uint64_t nr_submitted, nr_completed, nr_errors;
	/* The requests' time with the target, where the transport measures
	 * it (TCP): from the reap of the send that put a request's last PDU
	 * in the socket to the read that brought the target's next PDU for
	 * it.  It tells the target's share of a latency from ours (gateway
	 * bench), overstating the target's by our wake-up and by what was
	 * queued ahead of that PDU in the socket. */
	uint64_t target_ns;
};

struct nvmf_waiter {
	struct list_node link;
	void (*fn)(struct nvmf_waiter *w);
};

struct nvmf_transport_ops {
	const char *name;
	size_t req_priv_size;
	/* Most data bytes one command can carry through this transport (its
	 * own buffers), below MDTS and the option; 0 = no limit of its own. */
	uint32_t max_xfer;
	/* A one-command WRITE may come with its payload in a pipe
	 * (req->sink, pipe_sink.h), which submit then sends from or takes
	 * out into req->iov.  Without it nvmf_io takes the payload out. */
	bool pipe_writes;
	/* Allocate transport state for q (no I/O yet). */
	int (*queue_init)(struct nvmf_queue *q, const struct nvmf_path_opts *opts);
	/* Connect the transport (TCP connect + ICReq/ICResp; RDMA CM).  Calls
	 * nvmf_queue_transport_ready() or nvmf_queue_transport_error(). */
	int (*queue_connect)(struct nvmf_queue *q);
	/* Send the command; data per req->iov.  A failure here is reported
	 * through nvmf_queue_transport_error(), not as a return value, once the
	 * request has been accepted (0). */
	int (*submit)(struct nvmf_queue *q, struct nvmf_req *req);
	/* Stop all I/O; calls nvmf_queue_transport_quiesced() once no transport
	 * operation refers to any request any more. */
	void (*queue_shutdown)(struct nvmf_queue *q);
	void (*queue_free)(struct nvmf_queue *q);
	/* Optional: where req stands on the wire (sent? data? response?), for
	 * the log line of a command that timed out: it tells a target that
	 * never answered from a host that lost the answer. */
	void (*req_state)(struct nvmf_queue *q, struct nvmf_req *req, char *buf, size_t len);
};

extern const struct nvmf_transport_ops nvmf_tcp_ops;

const struct nvmf_transport_ops *nvmf_transport_find(enum nvmf_trtype t);
const char *nvmf_trtype_name(enum nvmf_trtype t);
int nvmf_trtype_parse(const char *s, enum nvmf_trtype *out);

/* ---- Called by transports ---- */

/* The transport is ready to carry capsules. */
void nvmf_queue_transport_ready(struct nvmf_queue *q);
/* The connection failed or the peer broke the protocol: the reason is
 * logged once here, then the queue is shut down. */
void nvmf_queue_transport_error(struct nvmf_queue *q, int err, const char *why, ...)
	__attribute__((format(printf, 3, 4)));
void nvmf_queue_transport_quiesced(struct nvmf_queue *q);
/* The request with this CID, if it is in flight; NULL otherwise. */
struct nvmf_req *nvmf_queue_find_req(struct nvmf_queue *q, uint16_t cid);
/* A response capsule (or C2HData with SUCCESS) completed req. */
void nvmf_req_complete(struct nvmf_req *req, const struct nvme_cqe *cqe);

/* ---- Used by the host core and its callers ---- */

int nvmf_queue_init(struct nvmf_queue *q, struct nvmf_ctrl *ctrl, struct reactor *r,
		    uint16_t qid, uint16_t size, const struct nvmf_path_opts *opts);
void nvmf_queue_free(struct nvmf_queue *q);
/* false, logged, when the transition is refused: callers branch on it. */
bool nvmf_queue_set_state(struct nvmf_queue *q, enum nvmf_queue_state s);
const char *nvmf_queue_state_name(enum nvmf_queue_state s);
/* A free request, or NULL when there is none or when callers wait for
 * one: a caller that would wait then queues behind them (nvmf_queue_wait),
 * so that the slots a completion batch frees are not all taken by new
 * submissions before the waiters' wake runs. */
struct nvmf_req *nvmf_req_get(struct nvmf_queue *q);
/* The same for a caller that waits with w: served while w is being woken. */
struct nvmf_req *nvmf_req_get_waiter(struct nvmf_queue *q, struct nvmf_waiter *w);
/* The same, but it may take one of the q->reserved requests too. */
struct nvmf_req *nvmf_req_get_reserved(struct nvmf_queue *q);
void nvmf_req_put(struct nvmf_req *req);
/* Submit a prepared request.  done() runs exactly once, on q's reactor. */
void nvmf_req_submit(struct nvmf_req *req);
void nvmf_queue_wait(struct nvmf_queue *q, struct nvmf_waiter *w);
/* Start the teardown; q->down_cb runs when it is quiet. */
void nvmf_queue_shutdown(struct nvmf_queue *q, int err);
void nvmf_req_set_data(struct nvmf_req *req, const struct iovec *iov, unsigned iovcnt,
		       uint32_t len, bool host_to_ctrl);

#endif
