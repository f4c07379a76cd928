/* nvmf-test-target: a RAM-backed NVMe/TCP target for the gateway's tests,
 * with fault knobs.  One thread, epoll; every buffer a command needs is
 * allocated when its queue connects, none per I/O.
 *
 * Modules: main.c (options, event loop, control socket), tcp.c (PDUs in and
 * out of one connection), nvme.c (subsystems, controllers, command
 * execution), faults.c (the knobs), log.c (gateway/log.h with its own
 * prefix). */
#ifndef TGT_H
#define TGT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "gateway/base/list.h"
#include "transports/nvme_spec.h"

/* Fields of Identify Controller that nvme_spec.h keeps in reserved ranges;
 * the target fills them by offset (the gateway host never reads them). */
enum {
	IDC_RAB = 72,
	IDC_CMIC = 76,
	IDC_OAES = 92,
	IDC_CNTRLTYPE = 111,
	IDC_ACL = 258,
	IDC_AERL = 259,
	IDC_LPA = 261,
	IDC_ELPE = 262,
	IDC_ANACAP = 343,
	IDC_ANAGRPMAX = 344,
	IDC_NANAGRPID = 348,
};
/* Checked against the struct, which tests/unit/test_id_ctrl.c checks
 * against nvmet's own bytes. */
_Static_assert(offsetof(struct nvme_id_ctrl, anacap) == IDC_ANACAP, "anacap");
_Static_assert(offsetof(struct nvme_id_ctrl, anagrpmax) == IDC_ANAGRPMAX, "anagrpmax");
_Static_assert(offsetof(struct nvme_id_ctrl, nanagrpid) == IDC_NANAGRPID, "nanagrpid");
_Static_assert(offsetof(struct nvme_id_ctrl, acl) == IDC_ACL, "acl");
_Static_assert(offsetof(struct nvme_id_ctrl, elpe) == IDC_ELPE, "elpe");
_Static_assert(offsetof(struct nvme_id_ctrl, cmic) == IDC_CMIC, "cmic");

/* ANA log page (log 0x0c). */
struct ana_log_hdr {
	uint64_t chgcnt;
	uint16_t ngrps;
	uint8_t rsvd[6];
} __attribute__((packed));
_Static_assert(sizeof(struct ana_log_hdr) == 16, "ana hdr");
struct ana_group_desc {
	uint32_t grpid;
	uint32_t nnsids;
	uint64_t chgcnt;
	uint8_t state;
	uint8_t rsvd[15];
} __attribute__((packed));
_Static_assert(sizeof(struct ana_group_desc) == 32, "ana desc");

enum ana_state {
	ANA_OPTIMIZED = 1,
	ANA_NONOPTIMIZED = 2,
	ANA_INACCESSIBLE = 3,
	ANA_PERSISTENT_LOSS = 4,
	ANA_CHANGE = 15,
};

#define TGT_MAX_PORTS 10
#define TGT_MAX_NS 32
#define TGT_MAX_QID 64
#define TGT_MQES 127 /* 128-entry I/O queues */
#define TGT_ADMIN_QSIZE 32
#define TGT_MDTS 5 /* 2^5 * 4 KiB = 128 KiB */
#define TGT_MAX_XFER (4096u << TGT_MDTS)
#define TGT_INCAPSULE 8192u /* I/O queue in-capsule data (IOCCSZ) */
#define TGT_AERL 3 /* four outstanding Asynchronous Event Requests */
#define TGT_PAGE 4096u

struct tgt_ns {
	uint32_t nsid;
	uint32_t block; /* bytes */
	uint8_t lba_shift;
	uint64_t nblocks;
	uint64_t bytes;
	uint8_t *data; /* what reads return: the controller's cache */
	uint8_t *durable; /* what survives lose-cache: as of the last Flush */
	uint64_t *dirty; /* one bit per 4 KiB page written since its Flush */
	uint64_t ndirty_words;
	uint8_t nguid[16];
	uint8_t eui64[8];
	uint8_t uuid[16];
	uint8_t ana[TGT_MAX_PORTS]; /* ANA state per port */
	uint32_t anagrp; /* ANA group ID: nsid unless the ana-group command moved it */
	uint64_t ana_chgcnt;
	/* The ns-* knobs (ns_change.c): a removed namespace is inactive
	 * (Identify, the active list and I/O do not find it) and keeps its
	 * bytes for ns-add; it may grow up to cap_bytes, the mappings'
	 * size, without moving (commands being sent point into them). */
	bool removed;
	/* Detached from these ports' controllers only (bit = port index),
	 * as Namespace Attachment does: inactive there, active elsewhere. */
	uint32_t detached;
	uint64_t cap_bytes;
};
/* Room each RAM namespace may grow into (virtual: untouched pages cost
 * nothing). */
#define TGT_NS_RESERVE (1ull << 30)
#define TGT_CHANGED_NS_MAX 1024u

struct tgt_subsys {
	char nqn[NVMF_NQN_SIZE];
	bool discovery;
	unsigned nr_ns;
	struct tgt_ns ns[TGT_MAX_NS];
	char serial[21];
	const char *allow_host; /* NULL: any host */
	bool disc_hidden; /* `disc-hide`: left out of the discovery log */
};

struct tgt_conn;

struct tgt_ctrl {
	struct list_node link;
	uint16_t cntlid;
	struct tgt_subsys *ss;
	unsigned port;
	char hostnqn[NVMF_NQN_SIZE];
	uint8_t hostid[16];
	uint32_t kato_ms;
	uint64_t kato_deadline_ns; /* 0: keep-alive off */
	unsigned csts_reads_enabled; /* CSTS reads since CC.EN (the rdy-stall knob) */
	uint32_t cc, csts;
	uint16_t nr_ioq; /* granted by Set Features Number of Queues */
	uint32_t aec; /* Asynchronous Event Configuration */
	struct tgt_conn *adminq;
	struct tgt_conn *ioq[TGT_MAX_QID + 1];
	/* Outstanding Asynchronous Event Requests (slots of the admin queue),
	 * and events that wait for one. */
	struct tgt_cmd *aer[TGT_AERL + 1];
	unsigned nr_aer;
	/* Result dwords of undelivered events, oldest first. */
	uint32_t aen_q[4];
	unsigned nr_aen_q;
	bool ana_aen_masked; /* until the ANA log is read with RAE 0 */
	/* Changed Namespace List (log 04h) since the host last read it;
	 * more than TGT_CHANGED_NS_MAX: overflowed. */
	uint32_t changed_ns[TGT_CHANGED_NS_MAX];
	unsigned nr_changed_ns;
	bool changed_ns_overflow;
	bool ns_aen_masked; /* until log 04h is read with RAE 0 */
};

enum tgt_cmd_state { CMD_FREE, CMD_DATA_IN, CMD_DELAYED, CMD_HELD, CMD_SENDING };

struct tgt_cmd {
	struct tgt_conn *conn;
	uint16_t idx; /* also the R2T transfer tag */
	enum tgt_cmd_state state;
	struct nvme_sqe sqe;
	uint8_t *buf; /* TGT_MAX_XFER bytes for data in either direction */
	uint32_t data_len; /* data the command moves */
	bool h2c; /* host to controller */
	uint32_t h2c_got; /* bytes received so far */
	uint32_t r2t_end;
	/* Where C2H data comes from (buf or the namespace). */
	const uint8_t *c2h_src;
	bool prepared; /* I/O checks done before the R2T */
	bool exec_pending; /* delayed: execute (reorder), not complete */
	struct tgt_ns *ns;
	struct nvme_cqe cqe;
	uint64_t due_ns; /* delayed completion */
	struct list_node link; /* delayed list */
	struct {
		struct nvme_tcp_data pdu;
		uint32_t hdgst;
	} __attribute__((packed)) c2h, r2t;
	struct {
		struct nvme_tcp_rsp pdu;
		uint32_t hdgst;
	} __attribute__((packed)) rsp;
	uint32_t ddgst;
};

enum tgt_rx_state { RX_HDR, RX_PAD, RX_DATA, RX_DDGST };

struct tgt_txe {
	struct iovec iov;
	struct tgt_cmd *release; /* freed when this entry is fully sent */
};

struct tgt_conn {
	struct list_node link;
	int fd;
	unsigned port;
	char peer[64];
	bool ic_done, closing;
	bool hdgst, ddgst;
	uint32_t maxr2t; /* 1's based */
	uint16_t qid;
	bool connected; /* Fabrics Connect done */
	uint16_t sqhd, qsize;
	bool sq_flow_off; /* host disabled SQ flow control at Connect */
	struct tgt_ctrl *ctrl;
	struct tgt_cmd *cmds;
	unsigned nr_cmds;
	struct list_node free_cmds;
	unsigned nr_busy; /* slots not on free_cmds */
	uint8_t *bufs;

	/* receive */
	uint8_t *rbuf;
	uint32_t rlen, roff;
	enum tgt_rx_state rx;
	uint8_t rhdr[NVME_TCP_MAX_HLEN + 16];
	uint32_t rhdr_len, rhdr_need;
	uint32_t pad_left, data_left;
	uint8_t *data_dst;
	struct tgt_cmd *rx_cmd;
	uint32_t rx_crc;
	uint8_t ddgst_buf[4];
	uint32_t ddgst_len;

	/* send: a ring of iovecs */
	struct tgt_txe *tx;
	unsigned tx_size, tx_head, tx_tail;
	bool want_out;
	struct nvme_tcp_icresp icresp;
	struct {
		struct nvme_tcp_term pdu;
		uint8_t data[NVME_TCP_TERM_MAX_DATA];
	} __attribute__((packed)) term;
	uint8_t bad[64]; /* a malformed PDU the faults asked for */
	uint8_t hpda_bytes; /* C2H data alignment the host asked for */
	uint64_t nr_cmds_rx;
	struct list_node flink; /* on T.flushq: has PDUs to write */
	bool on_flushq;
	struct ssl_st *ssl; /* --tls-key: every PDU through it */
	bool tls_up; /* handshake done */
	bool tls_sniff; /* --port-treq N:not-required: TLS or not, not known yet */
};

/* ---- global state (main.c) ---- */

struct tgt_port {
	int fd;
	char addr[64];
	char svc[16];
	bool v6;
	bool down; /* `port N down`: not listening, until `port N up` */
	bool aen_hold; /* `aen-hold N on`: events for its controllers wait */
	bool disc_hidden; /* `disc-port N hide`: left out of the discovery log */
	bool plain; /* --plain-port: no TLS here even with --tls-key */
	/* --port-treq: 0 as --tls-key says, else 1 + the TREQ listed (1 + 2,
	 * "not required": TLS and plaintext both taken, told apart by the
	 * first byte a host sends; the others list only). */
	int treq;
	uint64_t nr_io_cmds; /* I/O queue commands received on this port */
};

struct tgt_faults {
	int64_t drop_after; /* commands until every connection drops; -1 off */
	uint64_t refuse_until_ns;
	uint32_t delay_ms;
	uint32_t admin_delay_ms; /* every admin queue answer, Connect's included */
	uint32_t reorder_ms; /* each I/O command executes after 0..reorder_ms */
	uint32_t late_ms; /* each I/O command executes late_ms after it arrived */
	unsigned id_ns_fail; /* the next this many Identify Namespace fail... */
	unsigned id_desc_fail; /* the next this many descriptor lists (CNS 03h) too */
	uint16_t id_ns_status; /* ...with this generic status (no DNR) */
	uint16_t status; /* status field to return, 0: off */
	uint32_t status_nsid; /* only for this namespace's I/O, 0: every one */
	/* ana-after-pieces: a state change (no event) right after the ANA log
	 * was read at an offset up to its end; ana_mid_nsid 0: off. */
	char ana_mid_nqn[NVMF_NQN_SIZE];
	uint32_t ana_mid_nsid;
	unsigned ana_mid_port;
	uint8_t ana_mid_state;
	double status_frac;
	bool corrupt_hdgst, corrupt_ddgst;
	bool corrupt_io_only; /* only on I/O queues */
	/* DSM deallocate succeeds and deallocates nothing (the spec lets a
	 * controller ignore it): a hole made by DSM alone reads old data. */
	bool dsm_noop;
	uint64_t nr_wz_deac, nr_wz_nodeac; /* Write Zeroes by DEAC (stats) */
	int malformed; /* enum malformed_kind, 0: none */
	/* Abort of a command waiting for its delayed completion completes
	 * it with Command Abort Requested (abort-honour on). */
	bool abort_honour;
	/* rdy-stall on: after CC.EN the first CSTS read answers "not ready"
	 * and later ones are never answered. */
	bool rdy_stall;
	uint64_t nr_abort_cmds, nr_aborted; /* Aborts received, honoured */
	uint64_t rng;
	uint64_t nr_injected;
};

enum malformed_kind { BAD_NONE, BAD_TYPE, BAD_HLEN, BAD_CID, BAD_PLEN };

struct tgt {
	int epfd;
	bool tls; /* every port requires TLS (TREQ "required") */
	unsigned tls_ku_flood; /* --tls-ku-flood: seconds of key update requests */
	bool tls_pack; /* --tls-pack: records span PDU pieces */
	/* --uuid-only: NGUID and EUI-64 zero, the UUID in the descriptor
	 * list only, as Linux's target reports namespaces by default. */
	bool uuid_only;
	struct tgt_port ports[TGT_MAX_PORTS];
	unsigned nr_ports;
	struct tgt_subsys *subsys;
	unsigned nr_subsys;
	struct list_node conns, ctrls;
	struct list_node delayed;
	struct list_node flushq, dead;
	uint16_t next_cntlid;
	uint32_t maxh2cdata;
	int dlfeat; /* Identify Namespace DLFEAT; -1: 0x09 */
	uint32_t r2t_size; /* largest R2T, 0: whole transfer */
	int success_mode; /* 0 per SQ flow control (spec), 1 always, -1 never */
	struct tgt_faults f;
	/* --persist DIR: what survives the process (kill -9 included) is in
	 * files there; with --vwc only what was flushed (or written FUA)
	 * survives, else every acknowledged write (write-through, no VWC). */
	const char *persist_dir;
	bool vwc;
	unsigned ana_pad; /* --ana-pad: empty ANA groups after the real ones */
	uint16_t crdt[3]; /* Identify CRDT1..3 (the crdt knob), 100 ms units */
	uint16_t cqt; /* Identify CQT (the cqt knob), ms */
	uint64_t genctr;
	/* `disc-referral ADDR SVC`: other discovery controllers the log
	 * names (subtype 1); the test's own address makes a loop. */
	struct {
		char addr[64];
		char svc[16];
	} disc_refs[4];
	unsigned nr_disc_refs;
	uint64_t nr_conns_total, nr_cmds_total;
};

extern struct tgt T;

/* TLS (tls.c): --tls-key LINE makes every port require TLS 1.3. */
int tgt_tls_setup(const char *key_line, const char *kdf);
int tgt_tls_conn(struct tgt_conn *c);
/* A --port-treq N:not-required connection's first byte: TLS or not.
 * 1 decided, 0 nothing yet, -1 closed. */
int tgt_tls_sniff(struct tgt_conn *c);
int tgt_tls_handshake(struct tgt_conn *c);
ssize_t tgt_tls_read(struct tgt_conn *c, void *buf, size_t len);
ssize_t tgt_tls_write(struct tgt_conn *c, const void *buf, size_t len);
void tgt_tls_free(struct tgt_conn *c);

uint64_t now_ns(void);

/* main.c */
void tgt_listen_close(void);
void tgt_listen_close_one(unsigned i);
int tgt_listen_open(void);
void tgt_conn_arm(struct tgt_conn *c);
/* Whether the controllers report a volatile write cache. */
bool tgt_vwc_present(void);

/* tcp.c */
struct tgt_conn *conn_new(int fd, unsigned port, const char *peer);
void conn_readable(struct tgt_conn *c);
void conn_writable(struct tgt_conn *c);
void conn_close(struct tgt_conn *c, const char *why);
void conn_fatal(struct tgt_conn *c, uint16_t fes, uint32_t fei, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void conn_free(struct tgt_conn *c);
int conn_alloc_cmds(struct tgt_conn *c, unsigned n);
void cmd_send_r2t(struct tgt_cmd *cmd);
void cmd_send_completion(struct tgt_cmd *cmd);
void delayed_insert(struct tgt_cmd *cmd); /* by due_ns */
void nvme_io_execute_delayed(struct tgt_cmd *cmd);
uint64_t faults_rng(void);
void conn_send_malformed(struct tgt_conn *c, int kind);
void cmd_free(struct tgt_cmd *cmd);

/* nvme.c */
/* A command capsule (and any in-capsule data) has arrived. */
void nvme_cmd_arrived(struct tgt_cmd *cmd, uint32_t incapsule_len);
/* All H2C data of a command has arrived. */
void nvme_cmd_data_done(struct tgt_cmd *cmd);
/* Completes cmd with status st (the 15-bit field) and dw0. */
void nvme_complete(struct tgt_cmd *cmd, uint16_t st, uint32_t dw0);
void nvme_conn_gone(struct tgt_conn *c);
void nvme_ctrl_free(struct tgt_ctrl *ctrl, const char *why);
void nvme_kato_check(uint64_t now);
int nvme_set_ana(const char *nqn, uint32_t nsid, unsigned port, uint8_t state, bool aen, char *err,
		 size_t errlen);
void nvme_lose_cache(void);
/* The discovery log changes at run time (issue 19): a subsystem hidden or
 * shown again, referrals added or cleared; the generation counter moves
 * and discovery controllers that enabled the notice get the event. */
int nvme_disc_show(const char *nqn, bool show, char *err, size_t errlen);
/* Port idx (0-based) in or out of the discovery log, with the change
 * event: a subsystem's new port, as an array adds one at run time. */
void nvme_disc_port_show(unsigned idx, bool show);
int nvme_disc_referral(const char *addr, const char *svc, char *err, size_t errlen);
void nvme_disc_referrals_clear(void);
int subsys_add(const char *spec);
const char *ana_state_name(uint8_t s);
int ana_state_parse(const char *s);
int nvme_set_ana_group(const char *nqn, uint32_t nsid, uint32_t grp, bool aen, char *err,
		       size_t errlen);

/* An event for ctrl (the result dword of an AER completion), delivered
 * at once if an AER is outstanding. */
void nvme_aen_queue(struct tgt_ctrl *ctrl, uint32_t ev);
/* Delivers what waits for ctrl (after `aen-hold N off`). */
void nvme_aen_kick(struct tgt_ctrl *ctrl);
struct tgt_subsys *tgt_find_subsys(const char *nqn);

/* ns_change.c: the ns-* knobs.  The changed-namespace log and event. */
int ns_change_command(char **w, unsigned nw, char *reply, size_t len);
/* Log 04h into buf (4096 bytes); clears the list and unmasks the event
 * unless rae. */
void ns_changed_log(struct tgt_ctrl *ctrl, uint8_t *buf, bool rae);

/* faults.c */
int faults_command(char *line, char *reply, size_t len);
int faults_option(const char *name, const char *arg);
/* Decides whether this I/O command gets the injected status (0: no). */
uint16_t faults_io_status(uint32_t nsid);
void faults_count_command(void);

#define ST(sct, sc) ((uint16_t)(((sct) << 8) | (sc)))
#define ST_DNR 0x4000
#define SC_INVALID_OPCODE ST(0, 0x01)
#define SC_INVALID_FIELD ST(0, 0x02)
#define SC_INTERNAL ST(0, 0x06)
#define SC_INVALID_NS ST(0, 0x0b)
#define SC_CMD_SEQ ST(0, 0x0c)
#define SC_SGL_LEN ST(0, 0x0f)
#define SC_SGL_TYPE ST(0, 0x11)
#define SC_SGL_OFFSET ST(0, 0x15)
#define SC_LBA_RANGE ST(0, 0x80)
#define SC_INVALID_QID ST(1, 0x01)
#define SC_AER_LIMIT ST(1, 0x05)
#define SC_INVALID_LOG ST(1, 0x09)
#define SC_NOT_SAVEABLE ST(1, 0x0d)
#define SC_CONNECT_FORMAT ST(1, 0x80)
#define SC_CONNECT_INVALID_PARAM ST(1, 0x82)
#define SC_CONNECT_INVALID_HOST ST(1, 0x84)

#endif
