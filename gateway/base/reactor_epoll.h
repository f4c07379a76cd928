/* The epoll backend of the reactor, for kernels without a usable io_uring
 * (missing, disabled by sysctl or seccomp, or lacking the operations).
 * Internal to gateway/base/reactor*.c. */
#ifndef GW_REACTOR_EPOLL_H
#define GW_REACTOR_EPOLL_H

#include "gateway/base/reactor.h"

enum reactor_op_kind {
	ROP_DONE, /* res holds the result, delivered on the next pass */
	ROP_RECV,
	ROP_SEND,
	ROP_RECVMSG,
	ROP_SENDMSG,
	ROP_ACCEPT,
	ROP_CONNECT, /* connect(2) answered EINPROGRESS: waits for POLLOUT */
	ROP_READ,
	ROP_POLL,
};

int ep_init(struct reactor *r);
void ep_fini(struct reactor *r);
/* Tries the operation at once (as io_uring would at submission); queues it
 * behind the descriptor's readiness when it would block. */
void ep_queue(struct reactor *r, struct reactor_op *op, enum reactor_op_kind kind, int fd,
	      void *buf, size_t len, void *aux, int flags);
void ep_connect(struct reactor *r, struct reactor_op *op, int fd,
		const struct sockaddr *addr, socklen_t addrlen);
void ep_nop(struct reactor *r, struct reactor_op *op);
void ep_cancel(struct reactor *r, struct reactor_op *target);
/* Waits up to timeout_ns (UINT64_MAX: no bound) and runs the completions;
 * returns how many ran. */
unsigned ep_wait_and_complete(struct reactor *r, uint64_t timeout_ns);

/* A wait (call, the system call's name) failed with errno err for a reason
 * a retry does not cure at once: logged, rate-limited, and the reactor
 * pauses REACTOR_WAIT_FAIL_PAUSE_MS before its next pass. */
#define REACTOR_WAIT_FAIL_PAUSE_MS 10
void reactor_wait_failed(struct reactor *r, const char *call, int err);

#endif
