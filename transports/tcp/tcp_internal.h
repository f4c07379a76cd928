/* NVMe/TCP transport internals, shared by tcp.c (connection, send),
 * tcp_rx.c (receive state machine) and the fuzz harness. */
#ifndef TRANSPORTS_TCP_INTERNAL_H
#define TRANSPORTS_TCP_INTERNAL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transports/transport.h"

#define TCP_SEND_IOV 64
#define TCP_RBUF_SIZE (64u * 1024)
/* Payload at least this large is received straight into the request's
 * buffer instead of through the staging buffer: the kernel's copy is then
 * the only one. */
#define TCP_DIRECT_MIN 4096u
/* A C2HData PDU at least this large starts a stream of large transfers:
 * the staged reads that follow stop at the end of the next C2HData header
 * (see rx_stream_left), so that its data lands directly too instead of
 * filling the staging buffer and being copied out of it. */
#define TCP_STREAM_MIN (32u * 1024)
/* How long a deferred TermReq may wait for the send in flight. */
#define TCP_TERM_WAIT_MS 1000u
#define TCP_TERM_RETRY_MS 2u /* see tx_retry_timer */

enum tcp_item_kind { TCP_ITEM_CMD, TCP_ITEM_H2C };

struct tcp_send_item {
	struct list_node link;
	struct nvmf_req *req;
	uint8_t kind;
	bool queued; /* on the send list */
	bool in_batch; /* referenced by the sendmsg in flight */
};

struct tcp_req {
	struct tcp_send_item cmd_item;
	struct tcp_send_item h2c_item;
	struct {
		struct nvme_tcp_cmd pdu;
		uint32_t hdgst;
	} __attribute__((packed)) cmd;
	struct {
		struct nvme_tcp_data pdu;
		uint32_t hdgst;
	} __attribute__((packed)) h2c;
	uint32_t cmd_ddgst;
	uint32_t h2c_ddgst;
	uint32_t cmd_hdr_len; /* header + digest, as sent */
	uint32_t cmd_pad;
	bool in_capsule; /* write data went with the command */
	uint32_t h2c_off; /* data handed to the socket so far */
	uint32_t r2t_end; /* end of the active R2T */
	uint16_t ttag;
	uint32_t c2h_off; /* data received so far */
	/* The response may arrive before the send completion is reaped: the
	 * request completes only when both have happened. */
	bool resp_ready;
	struct nvme_cqe resp;
	/* The target's turn (q->target_ns): since when it has had all we
	 * sent for this request (0: not its turn), and whether it has sent a
	 * PDU for it since our last send was queued (then a later reap of
	 * that send starts no turn). */
	uint64_t turn_ns;
	bool heard;
};

enum tcp_rx_state {
	TCP_RX_HDR, /* common header, then the rest of hlen and the hdgst */
	TCP_RX_PAD, /* up to PDO */
	TCP_RX_DATA,
	TCP_RX_DDGST,
};

enum tcp_conn_state {
	TCP_CONN_IDLE,
	TCP_CONN_CONNECTING,
	TCP_CONN_TLS, /* TLS handshake in progress (before the ICReq) */
	TCP_CONN_ICREQ, /* ICReq sent, waiting for ICResp */
	TCP_CONN_LIVE,
	TCP_CONN_CLOSING,
};

struct tcp_queue {
	struct nvmf_queue *q;
	struct nvmf_path_opts opts;
	int fd;
	enum tcp_conn_state conn;
	struct sockaddr_storage sa;
	socklen_t salen;
	unsigned ops_in_flight;
	struct reactor_op connect_op, recv_op, send_op;
	bool connect_pending, recv_pending, send_pending;
	struct reactor_timer connect_timer;
	struct reactor_msg quiesce_msg;
	bool quiesce_queued;

	/* Negotiated by ICReq/ICResp. */
	bool hdgst, ddgst;
	uint32_t cpda_bytes; /* H2C data alignment */
	uint32_t maxh2cdata;

	/* Send side: items wait on sendq; one sendmsg in flight at a time
	 * carries as many of them as fit, which batches small PDUs. */
	struct list_node sendq;
	struct iovec siov[TCP_SEND_IOV];
	unsigned siov_cnt, siov_first;
	struct msghdr smsg;
	struct tcp_send_item *batch[TCP_SEND_IOV];
	unsigned batch_cnt;
	struct nvme_tcp_icreq icreq;
	struct {
		struct nvme_tcp_term pdu;
		uint8_t data[NVME_TCP_TERM_MAX_DATA];
	} __attribute__((packed)) term;
	/* A protocol error found while a sendmsg was in flight: the TermReq
	 * goes out once that send is reaped whole (so it does not land inside
	 * another PDU), or not at all if term_timer fires first. */
	bool term_deferred;
	/* Commands were in flight when the queue started closing: close with
	 * a reset, not a FIN behind the unsent bytes (see quiesce_run). */
	bool abort_close;
	struct reactor_timer term_timer;
	/* A spliced H2CData that a TermReq waits for, after SHUT_RD: an
	 * io_uring poll then completes at once (POLLRDHUP is always in its
	 * mask), so room is looked for every TCP_TERM_RETRY_MS instead. */
	struct reactor_timer tx_retry_timer;

	/* Receive side. */
	uint8_t *rbuf;
	uint32_t rlen; /* valid bytes in rbuf */
	enum tcp_rx_state rx_state;
	uint8_t rhdr[NVME_TCP_MAX_HLEN + NVME_TCP_DIGEST_LEN];
	uint32_t rhdr_len, rhdr_need;
	uint32_t rx_pad_left;
	uint32_t rx_data_left;
	uint32_t rx_ddgst_len;
	uint8_t rx_ddgst[NVME_TCP_DIGEST_LEN];
	uint32_t rx_crc;
	struct nvmf_req *rx_req;
	uint64_t rx_now_ns; /* when the socket read being consumed completed */
	uint8_t rx_flags;
	bool rx_direct; /* the recv in flight targets rx_req's buffer */
	bool rx_poll; /* the op in flight waits for bytes to splice (rx_req->sink) */
	/* In a stream of large C2HData PDUs: the bytes from here to the end of
	 * the header of the C2HData expected next (this PDU's rest, its
	 * digest, the CapsuleResp unless SUCCESS, then that header); staged
	 * reads take no more than this.  0 = no stream, read what is there. */
	uint32_t rx_stream_left;
	struct msghdr rmsg;
	struct iovec riov[NVMF_REQ_MAX_IOV + 1]; /* the data, then the staging buffer */
	uint64_t nr_pdus_rx;
	uint64_t nr_rx_staged_data; /* C2H data bytes copied out of rbuf */
	uint64_t nr_rx_direct_data; /* C2H data bytes that landed in the request */
	uint64_t nr_rx_spliced_data; /* C2H data bytes spliced into the caller's pipe */
	uint64_t nr_tx_batches, nr_tx_pdus; /* sends and the PDUs they carried */

	/* A WRITE whose payload is in the caller's pipe (req->sink) goes out
	 * as one H2CData PDU: its header, then the payload duplicated from
	 * that pipe (tee), are spliced from tx_pipe to the socket, alone in
	 * the send.  Only on an O_NONBLOCK socket with SIGPIPE ignored. */
	struct pipe_sink tx_pipe;
	bool tx_pipe_ok;
	bool sock_nonblock; /* fd is O_NONBLOCK (tcp_tx_pipe_setup) */
	bool tx_splicing; /* the send in flight is tx_pipe's */
	struct reactor_msg tx_splice_msg; /* its end, deferred */
	uint64_t nr_tx_spliced_data; /* H2C data bytes spliced from a pipe */

	/* TLS (tcp_tls.c), NULL when the path has none. */
	struct tcp_tls *tls;
};

static inline struct tcp_req *tcp_req_of(struct nvmf_req *req)
{
	return (struct tcp_req *)req->tp;
}

/* Receive state machine (tcp_rx.c).  Consumes bytes from buf; returns the
 * count consumed (less than len only when the queue failed), or -errno
 * after the connection was failed with a logged reason. */
int tcp_rx_consume(struct tcp_queue *tq, const uint8_t *buf, uint32_t len);
/* The target sent a PDU for req (R2T, C2HData, CapsuleResp): its turn,
 * if it had one, ends (nvmf_queue.target_ns). */
void tcp_req_heard(struct tcp_queue *tq, struct nvmf_req *req);
/* Arms the socket's receive, once the ICReq is sent (the unit tests' live
 * queue arms it itself). */
void tcp_recv_arm(struct tcp_queue *tq);
/* Bytes the next read into the staging buffer should ask for, at most
 * room: all there is, except in a stream of large C2HData PDUs. */
uint32_t tcp_rx_staged_len(const struct tcp_queue *tq, uint32_t room);
/* n bytes of PDU payload landed directly in rx_req's buffer. */
int tcp_rx_direct_done(struct tcp_queue *tq, uint32_t n);
/* The payload being received goes to rx_req's pipe (pipe_sink.h) and the
 * staging buffer is empty: the socket's bytes can be spliced. */
bool tcp_rx_splice_wanted(const struct tcp_queue *tq);
/* Splices what the socket holds of that payload.  1: the socket is empty,
 * poll for more; 0: receive as usual (the data is complete, or the pipe
 * was given up and its bytes put back in the buffer); <0: the queue failed.
 * after_poll: a poll said the socket is readable, so an empty one has an
 * end or an error for the ordinary receive to report. */
int tcp_rx_splice(struct tcp_queue *tq, bool after_poll);
void tcp_rx_reset(struct tcp_queue *tq);
/* Fails the connection for a protocol error: sends an H2C TermReq with
 * fes/fei (now if the send side is idle, else after the send in flight is
 * reaped), and tears the queue down. */
int tcp_protocol_error(struct tcp_queue *tq, uint16_t fes, uint32_t fei,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Writes the TermReq prepared in tq->term straight to the socket, best
 * effort: only when no sendmsg of ours is in flight. */
void tcp_send_term(struct tcp_queue *tq);

/* Send side (tcp.c), used by the receive path. */
/* -errno after failing the queue (a write's pipe that broke). */
int tcp_queue_h2c(struct tcp_queue *tq, struct nvmf_req *req);
/* Lets this live queue send H2CData out of pipes, if the socket can be
 * made O_NONBLOCK for the reactor and SIGPIPE is ignored. */
void tcp_tx_pipe_setup(struct tcp_queue *tq);
/* Complete req now, or when its send is reaped. */
void tcp_req_respond(struct tcp_queue *tq, struct nvmf_req *req, const struct nvme_cqe *cqe);
/* Sends the ICReq (through TLS when the path has it). */
void tcp_send_icreq(struct tcp_queue *tq);
/* Handles a validated ICResp. */
int tcp_ic_done(struct tcp_queue *tq, const struct nvme_tcp_icresp *ic);

/* ---- TLS 1.3 on BIOs over our buffers (tcp_tls.c) ----
 *
 * Under TLS the socket's send always carries tls->out (ciphertext, a FIFO
 * sent from out_sent to out_len) and its receive always lands in tls->in,
 * which the read BIO hands to OpenSSL in place (from in_off to in_len);
 * the plaintext PDUs of a batch (tq->siov) are sealed into tls->out as it
 * has room, and a batch is released once all of it is sealed and its
 * ciphertext sent.  Received ciphertext is opened by SSL_read: the payload
 * of a large C2HData straight into the request's buffer (then
 * tcp_rx_direct_done), everything else into rbuf for tcp_rx_consume. */
#define TCP_TLS_OUT_SIZE (64u * 1024)
#define TCP_TLS_IN_SIZE (64u * 1024)

struct tcp_tls {
	struct ssl_st *ssl;
	struct bio_st *rbio, *wbio; /* owned by ssl */
	struct nvmf_tls_psk psk; /* ssl points at it */
	uint8_t *out; /* TCP_TLS_OUT_SIZE */
	uint32_t out_sent, out_len;
	uint8_t *in; /* TCP_TLS_IN_SIZE */
	uint32_t in_off, in_len; /* received, not yet taken by OpenSSL */
	/* A peer that sends key update requests and does not read our
	 * answers: the receive waits while TLS holds this much unsent
	 * (re-armed as it drains), and TLS_CTL_MAX bytes of such answers
	 * with no data between them fail the queue. */
	uint32_t ctl_bytes;
	bool rx_parked;
};

/* Allocates tq->tls when the path asks for TLS; 0 or -errno. */
int tcp_tls_init(struct tcp_queue *tq);
void tcp_tls_free(struct tcp_queue *tq);
/* The TCP connection is up: start the client handshake.  The ICReq goes
 * out when it is done; a failure fails the queue with one line. */
void tcp_tls_start(struct tcp_queue *tq);
/* Seals as much of the plaintext in tq->siov as tls->out has room for
 * and sends the ciphertext unless a send is in flight. */
void tcp_tls_seal_send(struct tcp_queue *tq);
/* The socket send of n ciphertext bytes completed (n > 0).  True when the
 * batch's plaintext is all sealed and sent (the caller releases it). */
bool tcp_tls_sent(struct tcp_queue *tq, uint32_t n);
/* Arms the socket receive into tls->in. */
void tcp_tls_recv_arm(struct tcp_queue *tq);
/* n ciphertext bytes arrived in tls->in: opened and consumed (or, during
 * the handshake, handed to it).  0, or -errno once the queue failed. */
int tcp_tls_received(struct tcp_queue *tq, uint32_t n);
/* A TermReq (tq->term) sealed and written straight to the socket, best
 * effort. */
void tcp_tls_send_term(struct tcp_queue *tq);
/* close_notify written straight to the socket, best effort, when nothing
 * of ours is being sent. */
void tcp_tls_close_notify(struct tcp_queue *tq);

#endif
