/* The process's budget for NBD and FUSE data buffers.
 *
 * One counter for the whole process, shared by every reactor: taking and
 * giving are lock-free atomics (no message, no lock on the data path; a
 * waiter's begin takes a short lock to tell the hooks).
 * Nothing blocks here: a caller that cannot take what it needs stops
 * reading requests and tries again later (see nbd/conn.c). */
#ifndef GW_MEMBUDGET_H
#define GW_MEMBUDGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The defaults, also stated in the README and the man page. */
#define MEMBUDGET_DEFAULT_BYTES (256ull << 20)
#define MEMBUDGET_MIN_BYTES (1ull << 20)
#define MEMBUDGET_DEFAULT_STALL_S 30u

/* Told when someone begins to wait for the budget (membudget_wait_begin),
 * on the waiter's thread with the hooks' lock held: fn must only post a
 * message or set a flag (FUSE posts one to its reactor, which gives its
 * cached buffers back at once). */
struct membudget_hook {
	void (*fn)(struct membudget_hook *h);
	struct membudget_hook *next;
};

struct membudget {
	uint64_t limit;
	_Atomic uint64_t used;
	_Atomic uint64_t peak;
	_Atomic unsigned waiters; /* callers that could not take and wait */
	_Atomic uint64_t waits; /* times someone had to wait, ever */
	/* A client that takes less than NBD_STALL_MIN_BYTES for this long while someone
	 * waits for buffers is cut off (it holds buffers others need). */
	uint64_t stall_ns;
	atomic_flag hook_lock; /* a waiter's begin, off the data path */
	struct membudget_hook *hooks;
};

/* Before anyone uses it (the global: before the reactors start). */
void membudget_init(struct membudget *b, uint64_t limit, unsigned stall_s);
/* Data buffers are large: malloc gives them their own mappings and
 * unmaps them when freed, at a fixed threshold (glibc would otherwise
 * raise it as buffers are freed and keep freed ones resident in its
 * arenas), so that RSS follows the budget.  Smaller allocations are never
 * trimmed from the heap, so that the data path finds warm pages.  Called
 * by main() for every command, before any thread starts. */
void membudget_pin_allocator(void);
/* The process's budget; set once before the reactors start. */
struct membudget *membudget_global(void);

/* Takes n bytes if used + n stays within the limit, or if nothing at all
 * is taken: a budget smaller than one request still makes progress, one
 * request at a time. */
bool membudget_take(struct membudget *b, uint64_t n);
void membudget_give(struct membudget *b, uint64_t n);
/* Counts n bytes taken by one who cannot wait (FUSE): others yield. */
void membudget_charge(struct membudget *b, uint64_t n);

void membudget_wait_begin(struct membudget *b);
void membudget_wait_end(struct membudget *b);
/* From any thread.  Once del returns, h's fn is not running and is not
 * called again. */
void membudget_hook_add(struct membudget *b, struct membudget_hook *h);
void membudget_hook_del(struct membudget *b, struct membudget_hook *h);

static inline unsigned membudget_waiters(struct membudget *b)
{
	return atomic_load_explicit(&b->waiters, memory_order_relaxed);
}

static inline uint64_t membudget_used(struct membudget *b)
{
	return atomic_load_explicit(&b->used, memory_order_relaxed);
}

/* What one connection may hold: a quarter of the budget, so that a few
 * connections that stop taking replies cannot hold it all, but never
 * less than one largest request (max_req) nor more than 64 MiB. */
uint64_t membudget_conn_cap(const struct membudget *b, uint64_t max_req);

/* I/O that waits for a usable path would pin its buffers for as long as
 * the outage lasts (ctrl_loss_tmo, or for ever), and cannot be failed
 * sooner than the operator said.  So while some does, an exporter takes
 * no new buffer of want bytes for more I/O of that failure domain (one
 * target: group bytes of it wait now) past a quarter of the budget, nor
 * for any waiting domain past half of it (total: all that waits now): the
 * clients of the target that is down stop being read (their requests
 * would only wait too), those of the others still get buffers.  True:
 * don't take. */
static inline bool membudget_path_wait_over(const struct membudget *b, uint64_t group,
					    uint64_t total, uint64_t want)
{
	return group && (group + want > b->limit / 4 || total + want > b->limit / 2);
}

#endif
