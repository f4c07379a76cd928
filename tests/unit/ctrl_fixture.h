/* A live controller whose admin queue is an NVMe/TCP queue on a
 * socketpair, without a target: the unit tests and the namespace change
 * fuzzer play the controller, reading the host's admin commands and
 * answering them (data and completion fed to tcp_rx_consume).  The
 * controller's own code (AER, Changed Namespace List, re-identify) runs
 * unchanged on it. */
#ifndef TESTS_CTRL_FIXTURE_H
#define TESTS_CTRL_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transports/ctrl.h"
#include "transports/nvme_spec.h"
#include "transports/tcp/tcp_internal.h"

struct ctrl_fixture {
	struct reactor r;
	struct nvmf_ctrl c;
	struct tcp_queue *tq;
	int peer; /* the "controller" end */
	uint8_t sent[64 * 1024]; /* what the host sent, not taken yet */
	size_t sent_len;
	unsigned ns_cb_calls;
};

/* A LIVE controller named name with the Namespace Attribute Changed
 * notice enabled, its table empty, its AER not yet submitted.  0 or
 * -errno. */
int ctrlfx_init(struct ctrl_fixture *f, const char *name);
void ctrlfx_fini(struct ctrl_fixture *f);
/* Runs the reactor until the host's sends are done; false if not (bounded). */
bool ctrlfx_settle(struct ctrl_fixture *f);
/* The next command capsule the host sent, or false if none. */
bool ctrlfx_next_cmd(struct ctrl_fixture *f, struct nvme_sqe *sqe);
/* The same, waiting up to ms of the reactor's clock (timers run). */
bool ctrlfx_wait_cmd(struct ctrl_fixture *f, struct nvme_sqe *sqe, unsigned ms);
/* Answers command cid: len bytes of data (0: none), then the completion
 * with status (without the phase bit) and dw0.  false if the host
 * refused the PDUs (the queue went down). */
bool ctrlfx_reply(struct ctrl_fixture *f, uint16_t cid, const void *data, uint32_t len,
		  uint16_t status, uint32_t dw0);
/* ctrl_aer_submit, the AER the live controller keeps outstanding. */
void ctrlfx_arm_aer(struct ctrl_fixture *f);
/* Identify Namespace data: nsze blocks of 1 << ds bytes, identity tag. */
void ctrlfx_id_ns(struct nvme_id_ns *id, uint64_t nsze, uint8_t ds, uint8_t tag);

#endif
