/* An NVMe-oF controller as the host sees it: the admin queue, the I/O
 * queues, what Identify said, keep-alive, bring-up and shutdown. */
#ifndef TRANSPORTS_CTRL_H
#define TRANSPORTS_CTRL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/base/reactor.h"
#include "transports/auth/auth.h"
#include "transports/transport.h"

struct nvmf_ctrl_opts {
	char name[64]; /* log prefix */
	char subnqn[NVMF_NQN_SIZE];
	char hostnqn[NVMF_NQN_SIZE];
	uint8_t hostid[16];
	struct nvmf_path_opts path;
	unsigned nr_io_queues;
	unsigned queue_size;
	unsigned kato_ms; /* 0 = no keep-alive (discovery) */
	unsigned io_timeout_ms;
	/* Cap on the bytes of one NVMe command, below MDTS; 0 = MDTS only. */
	uint32_t max_xfer;
	bool discovery;
	/* DH-HMAC-CHAP secrets (len 0 = none), used when a Connect response
	 * asks for authentication; the controller key makes it mutual. */
	struct nvmf_dhchap_key dhchap_key;
	struct nvmf_dhchap_key dhchap_ctrl_key;
};

struct nvmf_ns {
	uint32_t nsid;
	uint64_t nsze; /* blocks */
	uint32_t lba_shift;
	uint32_t lba_size;
	uint8_t dlfeat;
	uint32_t optimal_io; /* bytes, 0 if not reported */
	uint8_t nguid[16];
	uint8_t eui64[8];
	/* From the descriptor list (Identify CNS 03h), all zero when none:
	 * Linux's target reports its namespaces' identity there only, its
	 * NGUID and EUI-64 being zero unless set by hand. */
	uint8_t uuid[16];
	uint32_t anagrpid;
	uint8_t ana_state; /* enum nvme_ana_state; OPTIMIZED without ANA */
	/* ns_events when a change event last identified it (0: the bring-up
	 * did): what the subsystem said just now, against an entry an event
	 * left as it was (its Identify failed, or it was not in the list). */
	unsigned id_event;
};

/* The controller states of the Linux host; the resilience issue uses
 * resetting; bring-up walks through its own steps while connecting. */
enum nvmf_ctrl_state {
	NVMF_CTRL_NEW,
	NVMF_CTRL_CONNECTING,
	NVMF_CTRL_LIVE,
	NVMF_CTRL_RESETTING,
	NVMF_CTRL_DELETING,
	NVMF_CTRL_DEAD,
};

enum nvmf_init_step {
	INIT_NONE,
	INIT_ADMIN_CONNECT,
	INIT_GET_CAP,
	INIT_GET_VS,
	INIT_SET_CC,
	INIT_WAIT_RDY,
	INIT_IDENTIFY_CTRL,
	INIT_SET_NUM_QUEUES,
	INIT_NS_LIST,
	INIT_IDENTIFY_NS,
	INIT_NS_DESCS,
	INIT_ANA_LOG,
	INIT_AEN_CONFIG,
	INIT_IO_QUEUES,
	INIT_DONE,
};

struct nvmf_ctrl;
typedef void (*nvmf_ctrl_cb)(struct nvmf_ctrl *ctrl, int err);

struct nvmf_ctrl {
	struct nvmf_ctrl_opts opts;
	enum nvmf_ctrl_state state;
	enum nvmf_init_step step;
	int error;
	struct reactor *r; /* admin queue, keep-alive, bring-up */
	struct nvmf_queue adminq;
	struct nvmf_queue *ioq;
	struct reactor **io_reactors; /* reactor of I/O queue i */
	unsigned nr_ioq; /* allocated by the controller */
	unsigned nr_ioq_connected;
	unsigned nr_ioq_pending; /* bring-up: I/O queue Connects unanswered */
	unsigned nr_ioq_closing; /* teardown, shutdown: I/O queues not yet closed */
	int ioq_error;
	uint64_t cap;
	uint32_t vs;
	uint32_t cc;
	uint16_t cntlid;
	struct nvme_id_ctrl *id;
	uint32_t max_xfer; /* bytes per command after MDTS and opts */
	uint32_t in_capsule_max; /* I/O queue in-capsule data bytes */
	unsigned nr_ns;
	struct nvmf_ns *ns;
	uint32_t *ns_list; /* 1024 entries, from Identify */
	unsigned ns_list_idx, ns_list_len;
	void *admin_buf; /* 4 KiB for Identify and logs */
	/* The ANA log page, read whole (in several commands when it is
	 * larger than one transfer); grown as needed up to NVMF_ANA_LOG_MAX. */
	uint8_t *ana_log;
	size_t ana_log_alloc;
	size_t ana_have, ana_want; /* bytes read / to read */
	uint32_t ana_chunk; /* bytes asked by the command in flight */
	void (*ana_then)(struct nvmf_ctrl *c, int err);
	/* Read in pieces at offsets: after the last one the header is read
	 * again (ana_chk) and the whole page again when its change count
	 * moved, at most NVMF_ANA_REREADS times. */
	bool ana_pieces;
	unsigned ana_rereads;
	uint8_t ana_chk[16];
	int vwc_before; /* VWC of the previous bring-up, -1 before the first */
	uint64_t deadline_ns; /* of the current waiting step */
	/* The bring-up attempt's whole bound (ATTEMPT_CMDS_MS), which caps
	 * every step's; attempt_ms is its length, for the log. */
	uint64_t attempt_deadline_ns;
	unsigned attempt_ms;
	/* attempt_ms itself, CAP.TO included; 0: computed.  Tests set less;
	 * kept across nvmf_ctrl_connect like the owner's hooks. */
	unsigned attempt_timeout_ms;
	unsigned shutdown_timeout_ms; /* the CC.SHN wait; 0: SHUTDOWN_TIMEOUT_MS (tests set less) */
	struct reactor_timer step_timer;
	struct reactor_timer kato_timer;
	bool kato_outstanding;
	nvmf_ctrl_cb ready_cb;
	nvmf_ctrl_cb shutdown_cb;
	bool teardown_running; /* queues closing; shutdown_cb runs at the end */
	void (*ioq_close_then)(struct nvmf_ctrl *ctrl);
	struct nvmf_req *poll_req; /* the shutdown's or CSTS.RDY wait's command in flight */
	/* Recovery (set by the owner before connecting).  With lost_cb set a
	 * live controller that fails goes to RESETTING, closes every queue
	 * (their in-flight commands complete with the transport error) and
	 * then calls lost_cb on c->r; the owner reconnects or deletes it.
	 * Without it the controller goes DEAD, as the one-shot tools want. */
	nvmf_ctrl_cb lost_cb;
	/* The ANA states in ns[] changed (AEN or a refresh); on c->r. */
	void (*ana_cb)(struct nvmf_ctrl *c);
	/* ns[] was re-identified after a Namespace Attribute Changed event
	 * (entries grown, removed, added or replaced); on c->r.  The owner
	 * compares it with what it exports (nvmf_ns_change_classify). */
	void (*ns_cb)(struct nvmf_ctrl *c);
	/* The namespace change event being handled (ns_change.c): the
	 * Changed Namespace List (or the active list after an overflow),
	 * the NSIDs still to re-identify, and the Identify buffer; allocated
	 * at the first event. */
	uint32_t *nsc_log;
	uint32_t *nsc_work;
	void *nsc_id;
	struct nvmf_ns nsc_ns; /* identified, its descriptor list on the way */
	unsigned nsc_idx, nsc_len;
	bool nsc_busy, nsc_again;
	/* An Identify of the last event failed (Namespace Not Ready, say):
	 * the retry re-identifies every namespace (the active list), since
	 * the log that named it has been read. */
	bool nsc_id_failed, nsc_rescan;
	unsigned nsc_inflight; /* its commands in flight: 0 or 1 */
	/* The log or list read failed with a status: the target sends no
	 * further event until its log is read, so it is read again on this
	 * timer (1 s, doubling to 30 s) while LIVE. */
	struct reactor_timer nsc_timer;
	unsigned nsc_retry_ms;
	bool nsc_retry_quiet; /* at the 30 s ceiling: retries not logged */
	unsigned ns_events; /* events handled, for tests and status */
	/* A queue of this controller authenticated with its key, ever: a
	 * connection then lost while the verdict was due is a lost
	 * connection, not taken for the target's refusal (auth.c). */
	bool auth_ok;
	void *owner;
	bool reconnecting; /* a failed bring-up stays CONNECTING */
	bool ana; /* CMIC.ANA: the ANA log page is read */
	bool aer_armed;
	bool ana_busy, ana_again; /* a refresh running / wanted after it */
	uint64_t ana_chgcnt;
	/* Namespaces an ANA log page moved to another group than recorded:
	 * only grows, so the owner can tell a table the log brought up to
	 * date from one it merely left alone. */
	unsigned ana_regroups;
	unsigned kato_missed;
	unsigned resets; /* times this controller was reset */
	/* Aborts sent and not completed; those over the controller's limit
	 * (ACL) wait on abort_wait (ctrl.c). */
	unsigned nr_aborts;
	struct list_node abort_wait;
};

/* Start connecting; cb(ctrl, 0) when LIVE with all I/O queues, or
 * cb(ctrl, -errno) after the reason was logged.  io_reactors may be NULL
 * (every I/O queue on r) or an array of nr_io_queues reactors. */
int nvmf_ctrl_connect(struct nvmf_ctrl *ctrl, const struct nvmf_ctrl_opts *opts,
		      struct reactor *r, struct reactor **io_reactors, nvmf_ctrl_cb cb);
/* Orderly shutdown (CC.SHN, wait for SHST), then tear down the queues. */
void nvmf_ctrl_shutdown(struct nvmf_ctrl *ctrl, nvmf_ctrl_cb cb);
void nvmf_ctrl_free(struct nvmf_ctrl *ctrl);
/* Reset a live controller (operator request or an error found above the
 * transport): RESETTING, queues closed, then lost_cb.  Logged with why. */
void nvmf_ctrl_reset(struct nvmf_ctrl *ctrl, int err, const char *why);
/* Connect again with the same options after lost_cb (state RESETTING),
 * after a failed reconnect (CONNECTING) or after DEAD (operator reset).
 * The old queues are freed; cb as for nvmf_ctrl_connect. */
int nvmf_ctrl_reconnect(struct nvmf_ctrl *ctrl, nvmf_ctrl_cb cb);
/* Ask the controller to abort command cid of I/O queue sqid (from the
 * queue's reactor; runs on ctrl->r).  If it cannot, the controller is
 * reset. */
void nvmf_ctrl_abort(struct nvmf_ctrl *ctrl, uint16_t sqid, uint16_t cid);
/* Read the ANA log page again (an I/O saw an ANA status); ana_cb runs if
 * anything changed. */
void nvmf_ctrl_ana_refresh(struct nvmf_ctrl *ctrl);
/* Parses an ANA log page: fn(arg, grpid, state) per group descriptor.
 * -EPROTO when the page is shorter than it claims. */
int nvmf_ana_log_parse(const void *buf, size_t len, uint64_t *chgcnt,
		       void (*fn)(void *arg, uint32_t grpid, uint8_t state), void *arg);
/* The ANA state of one group, as the multipath snapshot keeps it. */
struct nvmf_ana_grp {
	uint32_t grp;
	uint8_t state;
};
/* The state of every group of c's namespaces into out (room for
 * c->nr_ns entries), sorted by group ID, each group once; the count. */
unsigned nvmf_ctrl_ana_groups(const struct nvmf_ctrl *c, struct nvmf_ana_grp *out);
/* The state of group grp in a sorted array of n, 0 when it is not there. */
uint8_t nvmf_ana_grp_state(const struct nvmf_ana_grp *a, unsigned n, uint32_t grp);
/* The ANA log page's length as far as buf[0..len) tells: the whole page's
 * when every group descriptor lies within len, else a lower bound of it
 * larger than len (the end of the first descriptor that does not fit, and
 * 32 bytes for each one after it).  Never reads past len. */
uint64_t nvmf_ana_log_need(const void *buf, size_t len);
/* The most this host reads of an ANA log page.  The page lists each group
 * (32 bytes) and each namespace ID (4 bytes) once: 1 MiB is room for 4096
 * groups and more than 200,000 namespaces, far more than the 1024
 * namespaces a controller is used with; a page claiming more is a broken
 * or hostile target, and the buffer stays allocated with the controller. */
#define NVMF_ANA_LOG_MAX (1u << 20)
/* After have bytes of the page were read and its descriptors need `need`
 * (> have) bytes: the bytes to have next (*want), and whether to read
 * them again from offset 0 in one command (*restart, when they fit one
 * transfer of chunk bytes) or on from have at increasing offsets.
 * -EMSGSIZE when need is beyond NVMF_ANA_LOG_MAX. */
/* Times a page read in pieces is read again because its change count
 * moved between the pieces, before the read fails with -EAGAIN. */
#define NVMF_ANA_REREADS 3
int nvmf_ana_next_read(size_t have, uint64_t need, uint32_t chunk, size_t *want,
		       bool *restart);
/* Applies an ANA log page to c's namespaces: each group's state, and the
 * group of a namespace the page lists under another group than recorded
 * (the target moved it).  1 when a state or group changed, 0 when not,
 * -EPROTO when the page is shorter than it claims. */
int nvmf_ctrl_ana_apply(struct nvmf_ctrl *c, const void *buf, size_t len);
/* I/O queue in-capsule data bytes from Identify's IOCCSZ. */
uint32_t nvmf_in_capsule_max(uint32_t ioccsz);
/* Bytes per NVMe command: the option (0 = 256 KiB) or MDTS (in units of
 * CAP.MPSMIN pages, 0 = no limit), whichever is smaller.  Defined for
 * every MDTS and CAP.  (A transport's own limit is applied after it, and
 * a fragmented caller buffer shortens commands in nvmf_io_chunk.) */
uint32_t nvmf_pick_max_xfer(uint64_t cap, uint8_t mdts, uint32_t opt_max);
struct nvme_id_ns;
/* Fills ns from Identify Namespace data; 1 when usable, 0 when the
 * namespace is inactive or cannot be used (the reason is logged). */
int nvmf_ns_from_id(const char *ctrl_name, uint32_t nsid, const struct nvme_id_ns *id,
		    struct nvmf_ns *ns);
/* The UUID of a Namespace Identification Descriptor list (len bytes, from
 * a target): 1 and uuid filled when it holds a well-formed one, else 0
 * with uuid zeroed.  Stops at the list's end (a zero type or length) or
 * at a descriptor that does not fit. */
int nvmf_ns_descs_uuid(const void *buf, size_t len, uint8_t uuid[16]);
/* A UUID other than all zero (zero: none reported, or not learnt yet). */
static inline bool nvmf_uuid_known(const uint8_t uuid[16])
{
	for (unsigned i = 0; i < 16; i++)
		if (uuid[i])
			return true;
	return false;
}
/* Whether the controller is asked for descriptor lists (NVMe 1.3 on). */
bool nvmf_ctrl_wants_descs(const struct nvmf_ctrl *c);
/* How many leading entries of an active namespace list (max entries) to
 * use: up to the first 0, stopping (logged) at an entry that is not
 * larger than the one before or is the broadcast NSID. */
unsigned nvmf_ns_list_count(const char *ctrl_name, const uint32_t *list, unsigned max);
const char *nvme_ana_state_name(uint8_t state);

/* What a namespace change means for an export built on `old`, given what
 * the target reports `now` (NULL: not active any more; old NULL: a
 * namespace not exported before).  Checked in this order: identity
 * (NGUID/EUI-64: another namespace under the same NSID, never served under
 * the old export), LBA format (offsets would mean other bytes), size. */
enum nvmf_ns_change {
	NVMF_NS_SAME,
	NVMF_NS_GROWN, /* serve on, at the new size */
	NVMF_NS_SHRUNK, /* fail the export: data past the end is gone */
	NVMF_NS_LBA_FORMAT, /* fail the export: blocks changed size */
	NVMF_NS_OTHER, /* fail the export: another namespace */
	NVMF_NS_REMOVED, /* fail I/O with EIO, take the exports down */
	NVMF_NS_ADDED,
};
enum nvmf_ns_change nvmf_ns_change_classify(const struct nvmf_ns *old, const struct nvmf_ns *now);
const char *nvmf_ns_change_name(enum nvmf_ns_change ch);
/* Puts ns into c's table (ascending NSID, room for 1024), replacing the
 * entry of the same NSID and keeping its ANA state; or removes nsid when
 * ns is NULL.  Returns false when the table is full. */
bool nvmf_ctrl_ns_update(struct nvmf_ctrl *c, uint32_t nsid, const struct nvmf_ns *ns);
const char *nvmf_ctrl_state_name(enum nvmf_ctrl_state s);
/* false, logged, when the transition table refuses it; callers branch on
 * it rather than repeat the table (the Linux host's nvme_change_ctrl_state). */
bool nvmf_ctrl_set_state(struct nvmf_ctrl *ctrl, enum nvmf_ctrl_state s);
struct nvmf_ns *nvmf_ctrl_find_ns(struct nvmf_ctrl *ctrl, uint32_t nsid);

/* An admin command with up to 4 KiB of data in ctrl->admin_buf or the
 * caller's buffer.  The request is the caller's until done runs. */
struct nvmf_req *nvmf_admin_req(struct nvmf_ctrl *ctrl);
/* Prepares req (from nvmf_admin_req) to read len bytes of log page lid for
 * nsid from byte off into buf. */
void nvmf_prep_get_log(struct nvmf_req *req, uint8_t lid, uint32_t nsid, void *buf,
		       uint32_t len, uint64_t off);

/* Send the Fabrics Connect for q (called when its transport is up). */
void nvmf_fabric_connect(struct nvmf_queue *q);
/* Connect one queue: transport, then Fabrics Connect; cb(q, err). */
void nvmf_queue_connect(struct nvmf_queue *q, nvmf_queue_cb cb);

/* Host identity (DESIGN.md): explicit values, else /etc/nvme, else a
 * generated one stored in state_dir.  Returns -errno with a logged reason. */
int nvmf_host_identity(const char *hostnqn_opt, const char *hostid_opt,
		       const char *state_dir, char hostnqn[NVMF_NQN_SIZE],
		       uint8_t hostid[16]);
/* The same with nvme-cli's folder (hostnqn, hostid) in nvme_dir instead
 * of /etc/nvme, so that tests never depend on the machine's. */
int nvmf_host_identity_at(const char *nvme_dir, const char *hostnqn_opt,
			  const char *hostid_opt, const char *state_dir,
			  char hostnqn[NVMF_NQN_SIZE], uint8_t hostid[16]);
int nvmf_uuid_parse(const char *s, uint8_t out[16]);
void nvmf_uuid_format(const uint8_t in[16], char out[37]);

#endif
