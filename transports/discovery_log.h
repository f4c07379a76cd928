/* A discovery log page as the gateway acts on it (issue 19): the peer's
 * bytes checked field by field into plain entries, the difference between
 * two versions of one controller's log as actions, and the bookkeeping
 * that keeps referrals from looping.  Pure: no I/O, so that unit tests and
 * a fuzzer can drive it (tests/unit/test_discovery_log.c,
 * tests/fuzz/fuzz_discovery_log.c). */
#ifndef GW_DISCOVERY_LOG_H
#define GW_DISCOVERY_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DLOG_MAX_RECORDS 4096	/* as DISC_MAX_RECORDS: more is not a target */
#define DLOG_NQN_MAX 223	/* NVMe Base: an NQN is at most 223 bytes */
#define DLOG_REFERRAL_DEPTH 4	/* referrals followed from a configured controller */
#define DLOG_MAX_CTRLS 64	/* discovery controllers known at once */

struct dlog_entry {
	uint8_t trtype;		/* NVMF_TRTYPE_TCP or NVMF_TRTYPE_RDMA */
	uint8_t adrfam;		/* NVMF_ADRFAM_IPV4, _IPV6 (rdma also _IB) */
	uint8_t subtype;	/* NVMF_SUBTYPE_* */
	uint8_t treq;
	uint8_t sectype;	/* tcp: TSAS security type (0 none, 2 TLS 1.3) */
	uint16_t portid;
	uint16_t cntlid;
	char trsvcid[6];	/* a decimal port, 1-65535 */
	char traddr[64];	/* an address literal of adrfam */
	char subnqn[DLOG_NQN_MAX + 1];
};

struct dlog {
	uint64_t genctr;
	uint32_t nr;		/* entries kept */
	uint32_t skipped;	/* records refused (see dlog_parse) */
	uint32_t dups;		/* records repeating an earlier one */
	struct dlog_entry *e;	/* nr of them, malloc'd */
};

/* The log at buf (len bytes: the header and the records it announces, as
 * the walk of gateway/discover.h leaves it) into out.  The header must
 * agree with len (numrec records of 1024 bytes fit, at most
 * DLOG_MAX_RECORDS) and have record format 0, else -EPROTO and why says
 * it.  A record that cannot be used is skipped, not fatal: an unknown or
 * unsupported transport (FC, loop), a bad address family, subtype, port
 * or address, a string field without its terminator or with bytes that
 * are not printable ASCII.  Exact repeats are kept once.  0, -EPROTO or
 * -ENOMEM; free with dlog_free. */
int dlog_parse(struct dlog *out, const uint8_t *buf, size_t len, const char **why);
void dlog_free(struct dlog *l);

/* Same subsystem, transport, address and port: one path. */
bool dlog_same_path(const struct dlog_entry *a, const struct dlog_entry *b);

enum dlog_action_kind {
	DLOG_NEW_TARGET,	/* an NVM subsystem not known before */
	DLOG_ADD_PATH,		/* a new port of a known subsystem */
	DLOG_GONE,		/* an NVM subsystem port no longer listed */
	DLOG_REFERRAL,		/* a new referral to another discovery controller */
	DLOG_REFERRAL_GONE,
};

struct dlog_action {
	enum dlog_action_kind kind;
	const struct dlog_entry *e;	/* points into the old log (gone) or the new */
};

/* What changed from old (NULL: nothing known yet) to new, in new's order
 * then old's.  known(ctx, subnqn) says whether the gateway already has a
 * target for that subsystem (may be NULL: none is known); two new ports of
 * one unknown subsystem in the same log give one DLOG_NEW_TARGET then a
 * DLOG_ADD_PATH, so that the policy hook that creates targets sees each
 * subsystem once.  Entries for the discovery subsystem itself (subtype 3)
 * give no action.  act must hold old->nr + new->nr; returns how many. */
size_t dlog_diff(const struct dlog *old, const struct dlog *new,
		 bool (*known)(void *ctx, const char *subnqn), void *ctx,
		 struct dlog_action *act);

/* The discovery controllers one configured controller leads to: itself
 * first, then referrals.  A referral to an address already in the set (the
 * same transport, address and port, whatever its spelling: "::1" and
 * "0:0::1" are one) is a loop; one more than DLOG_REFERRAL_DEPTH away from
 * the configured controller is too deep; both are refused, so a walk over
 * referrals ends. */
struct dlog_ctrl_key {
	uint8_t trtype;
	uint8_t addr[16];	/* IPv4 mapped into IPv6, or the IB GID */
	uint16_t port;
	uint8_t depth;		/* 0: the configured controller */
};

struct dlog_refs {
	struct dlog_ctrl_key k[DLOG_MAX_CTRLS];
	unsigned nr;
};

enum dlog_ref_verdict { DLOG_REF_FOLLOW, DLOG_REF_LOOP, DLOG_REF_TOO_DEEP, DLOG_REF_FULL,
			DLOG_REF_BAD };

/* The configured controller (depth 0): 0 or -EINVAL (not an address). */
int dlog_refs_init(struct dlog_refs *r, uint8_t trtype, const char *traddr, const char *trsvcid);
/* A referral seen in the log of the controller at depth parent_depth:
 * DLOG_REF_FOLLOW adds it (at parent_depth + 1). */
enum dlog_ref_verdict dlog_refs_add(struct dlog_refs *r, unsigned parent_depth,
				    const struct dlog_entry *e);
/* Forget a referral that its log no longer lists (it may come back). */
void dlog_refs_remove(struct dlog_refs *r, const struct dlog_entry *e);
const char *dlog_ref_verdict_name(enum dlog_ref_verdict v);

const char *dlog_trtype_name(uint8_t trtype);

#endif
