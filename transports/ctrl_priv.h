/* What the parts of the controller share: ctrl.c (state, keep-alive,
 * abort, queues, teardown, shutdown), fabrics.c (Connect, admin command
 * setup), ana.c (ANA log, asynchronous events), ctrl_init.c (bring-up).
 * Private to transports/; ctrl.h is the contract. */
#ifndef NVMF_CTRL_PRIV_H
#define NVMF_CTRL_PRIV_H

#include "gateway/base/log.h"
#include "transports/ctrl.h"

/* A controller's log line, "ctrl NAME: " written once (lvl is ERR, WARN,
 * NOTICE, INFO or DEBUG). */
#define ctrl_log(lvl, c, fmt, ...) obj_log(lvl, "ctrl %s: " fmt, (c)->opts.name, ##__VA_ARGS__)

#define ADMIN_QUEUE_SIZE 32
#define DEFAULT_STEP_TIMEOUT_MS 10000u
#define DEFAULT_MAX_XFER (256u * 1024)
#define SHUTDOWN_TIMEOUT_MS 5000u
/* A bring-up attempt's whole bound, besides each step's own: the two
 * connect steps at their step bounds (DEFAULT_STEP_TIMEOUT_MS + the connect
 * timeout each), CAP.TO for CSTS.RDY, and this for every other admin
 * command together: 1024 namespaces take about 2050 of them, 29 ms each
 * on average.  Without it each command's fresh 10 s let a target
 * answering just in time keep one attempt going for hours (1024
 * namespaces: (8 + 2 x 1024) x 10 s), ctrl_loss_tmo and the daemon's
 * start waiting behind it. */
#define ATTEMPT_CMDS_MS 60000u
/* And this much more per active namespace, added once the list is read
 * (its Identify and descriptor list): 1024 namespaces then get 60 s +
 * 1024 s, about 1 s a command at most, so a target far away (100 ms a
 * command over a WAN: 205 s for 1024) still comes up, while the bound
 * stays 20 times below what per-command bounds alone allowed. */
#define ATTEMPT_NS_MS 1000u

/* fabrics.c: the admin commands' setup.  ctrl_admin_req_reserved may take
 * one of the admin queue's reserved requests (NVMF_ADMIN_RESERVED): only
 * the AER (one outstanding), the namespace change handling and the ANA log
 * read (one command at a time each) use it, so each always finds one. */
struct nvmf_req *ctrl_admin_req_reserved(struct nvmf_ctrl *c);
void ctrl_prep_property_get(struct nvmf_req *req, uint32_t off, bool eight);
void ctrl_prep_property_set(struct nvmf_req *req, uint32_t off, uint64_t val);
void ctrl_prep_identify(struct nvmf_req *req, uint8_t cns, uint32_t nsid, void *buf);
void ctrl_prep_get_log(struct nvmf_req *req, uint8_t lid, void *buf, uint32_t len, uint64_t off);

/* ana.c: reads the whole ANA log page, then calls then(c, err). */
int ctrl_ana_read_start(struct nvmf_ctrl *c, void (*then)(struct nvmf_ctrl *, int));
void ctrl_aer_submit(struct nvmf_ctrl *c);
/* ns_change.c: a Namespace Attribute Changed event arrived (on c->r). */
void ctrl_ns_event(struct nvmf_ctrl *c);
void ctrl_ns_change_free(struct nvmf_ctrl *c);
/* Before the first event (nvmf_ctrl_connect): the retry timer. */
void ctrl_ns_change_init(struct nvmf_ctrl *c);
/* The Asynchronous Event Configuration bits this controller gets. */
uint32_t ctrl_aen_config(const struct nvmf_ctrl *c);

/* ctrl.c: the keep-alive timer's setup (nvmf_ctrl_init's; the unit
 * tests' controller fixture calls it too). */
void ctrl_kato_init(struct nvmf_ctrl *c);

/* ctrl_init.c: the bring-up steps and their timer. */
void ctrl_init_fail(struct nvmf_ctrl *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ctrl_init_next(struct nvmf_ctrl *c);
void ctrl_step_timeout(struct reactor_timer *t);
void ctrl_arm_step(struct nvmf_ctrl *c, unsigned ms);
/* The attempt's deadline, from its start (ctrl.c's ctrl_start). */
void ctrl_arm_attempt(struct nvmf_ctrl *c);
void ctrl_init_failed_down(struct nvmf_ctrl *c, int err);

/* ctrl.c: the I/O queues, LIVE, teardown. */
void ctrl_ioq_connect_all(struct nvmf_ctrl *c);
void ctrl_init_live(struct nvmf_ctrl *c);
void ctrl_teardown(struct nvmf_ctrl *c, nvmf_ctrl_cb cb);
#endif
