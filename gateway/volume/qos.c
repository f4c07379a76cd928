/* QoS token buckets, one shared set per volume.
 *
 * Why shared and not rate/R per reactor: an export's load is rarely spread
 * evenly over the reactors (one NBD connection lives on one reactor, the
 * kernel client may use one connection), and a per-reactor split would cap
 * such a client at rate/R.  So each limit is one bucket for the whole
 * export, kept as a virtual clock in a single 64-bit word that any reactor
 * advances with a compare-and-swap: lock-free, one atomic per bucket per
 * I/O, and fair between reactors in arrival order.
 *
 * A bucket of rate r and depth D (in time: D*r tokens) is the clock tat:
 * at time now it holds (now - tat)*r tokens, at most D*r.  An I/O of cost c
 * reserves its tokens at submission, debt allowed: tat' = max(tat, now-D) +
 * c/r, and it may start at tat' (or now, if later).  Reserving at arrival
 * gives every I/O its start time at once, in submission order, so the
 * queue of a reactor is sorted by start time and one timer per reactor
 * (armed for the head) releases it.  Reads and writes queue apart so that
 * a write waiting for a write limit does not hold back a read. */
#include "gateway/volume/qos.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/parse.h"
#include "gateway/base/log.h"

#define STAT_ADD(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)
#define LD(p) __atomic_load_n(p, __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n(p, v, __ATOMIC_RELAXED)

enum { C_IOPS, C_BW, C_READ_IOPS, C_READ_BW, C_WRITE_IOPS, C_WRITE_BW, NR_CELLS };
enum { Q_READ, Q_WRITE, NR_QUEUES };

/* Each bucket on a cache line of its own: reactors hammer them. */
struct qos_cell {
	_Alignas(64) uint64_t rate; /* per second, 0 = no limit */
	uint64_t depth_ns;
	uint64_t tat; /* ns, reactor_now_ns clock */
};

/* One per reactor, touched only on that reactor (r is set there once and
 * read by qos_drain). */
struct qos_rq {
	_Alignas(64) struct list_node queue[NR_QUEUES];
	struct reactor_timer timer;
	struct reactor *r;
	struct vol_stats *st;
	struct reactor_msg drain_msg;
	struct vol_qos *q;
};

struct vol_qos {
	struct qos_cell cells[NR_CELLS];
	struct vol_qos_limits limits; /* as set, for vol_get_qos */
	unsigned active; /* any cell limited */
	unsigned nr;
	/* The volume's reference and one per drain message on its way: a
	 * reactor whose queue was empty may run its message after the
	 * volume was destroyed. */
	unsigned refs;
	struct qos_rq rq[];
};

/* The start time the cell allows for cost c, with c reserved; 0 when the
 * cell does not limit. */
static uint64_t cell_reserve(struct qos_cell *cell, uint64_t now, uint64_t cost)
{
	uint64_t rate = LD(&cell->rate), depth = LD(&cell->depth_ns);
	uint64_t old, v0, v1, need;
	unsigned __int128 n;

	if (!rate || !cost)
		return 0;
	n = (unsigned __int128)cost * NSEC_PER_SEC / rate;
	need = n > UINT64_MAX / 4 ? UINT64_MAX / 4 : (uint64_t)n;
	old = LD(&cell->tat);
	do {
		/* An idle bucket is full, not fuller. */
		v0 = old;
		if (now > depth && v0 < now - depth)
			v0 = now - depth;
		v1 = v0 + need;
	} while (!__atomic_compare_exchange_n(&cell->tat, &old, v1, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return v1;
}

static struct vol_io *head(struct list_node *q)
{
	return list_empty(q) ? NULL : container_of(q->next, struct vol_io, qos_link);
}

static void rq_arm(struct qos_rq *rq, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	for (unsigned i = 0; i < NR_QUEUES; i++) {
		struct vol_io *io = head(&rq->queue[i]);
		if (io && io->qos_ready_ns < next)
			next = io->qos_ready_ns;
	}
	if (next == UINT64_MAX) {
		reactor_timer_cancel(&rq->timer);
		return;
	}
	if (rq->timer.armed && rq->timer.deadline_ns <= next)
		return;
	reactor_timer_arm(rq->r, &rq->timer, next > now ? next - now : 0);
}

/* Dispatches the queued I/O whose time has come (all of it when until is
 * UINT64_MAX), then re-arms the timer for what is left. */
static void rq_dispatch(struct qos_rq *rq, uint64_t now, uint64_t until)
{
	for (unsigned i = 0; i < NR_QUEUES; i++) {
		struct vol_io *io;

		while ((io = head(&rq->queue[i])) && io->qos_ready_ns <= until) {
			list_del(&io->qos_link);
			if (rq->st)
				STAT_ADD(rq->st->qos_queued, -1);
			vol_dispatch(io);
		}
	}
	rq_arm(rq, now);
}

static void rq_release(struct reactor_timer *t)
{
	struct qos_rq *rq = container_of(t, struct qos_rq, timer);
	uint64_t now = reactor_now_ns();

	rq_dispatch(rq, now, now);
}

static void qos_put(struct vol_qos *q)
{
	if (__atomic_sub_fetch(&q->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(q);
}

/* On the queue's reactor: the volume is draining, nothing waits.  The
 * volume may be gone already when the queue was empty (its I/O, if any,
 * keeps it alive until dispatched). */
static void rq_drain_msg(struct reactor_msg *m)
{
	struct qos_rq *rq = container_of(m, struct qos_rq, drain_msg);
	struct vol_qos *q = rq->q;

	rq_dispatch(rq, reactor_now_ns(), UINT64_MAX);
	qos_put(q);
}

void qos_drain(struct volume *v)
{
	struct vol_qos *q;

	/* seq_cst against qos_admit's store of rq->r and load of draining:
	 * either that reactor sees the flag and empties its queue itself,
	 * or we see its rq->r and send it the message (or both). */
	if (__atomic_exchange_n(&v->draining, true, __ATOMIC_SEQ_CST))
		return;
	q = __atomic_load_n(&v->qos, __ATOMIC_ACQUIRE);
	if (!q)
		return;
	for (unsigned i = 0; i < q->nr; i++) {
		struct qos_rq *rq = &q->rq[i];
		struct reactor *r = __atomic_load_n(&rq->r, __ATOMIC_SEQ_CST);

		if (!r)
			continue;
		__atomic_add_fetch(&q->refs, 1, __ATOMIC_RELAXED);
		rq->drain_msg.fn = rq_drain_msg;
		reactor_send_msg(r, &rq->drain_msg);
	}
	log_info("volume %s: draining: I/O waiting for QoS goes now, new I/O is not limited",
		 v->name);
}

bool qos_admit(struct volume *v, struct reactor *r, struct vol_io *io)
{
	struct vol_qos *q = __atomic_load_n(&v->qos, __ATOMIC_ACQUIRE);
	struct qos_rq *rq;
	unsigned cls = io->op == VOL_READ ? Q_READ : Q_WRITE;
	uint64_t now = io->start_ns, ready = now;

	if (!q || r->id >= q->nr)
		return true;
	rq = &q->rq[r->id];
	if (!rq->r)
		__atomic_store_n(&rq->r, r, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&v->draining, __ATOMIC_SEQ_CST)) {
		/* Behind what was queued before the drain (its message may
		 * not have run yet): order, as below. */
		if (!list_empty(&rq->queue[Q_READ]) || !list_empty(&rq->queue[Q_WRITE]))
			rq_dispatch(rq, now, UINT64_MAX);
		return true;
	}
	if (LD(&q->active)) {
		uint64_t ops = io->op == VOL_FLUSH ? 0 : 1;
		uint64_t bytes = io->op == VOL_READ || io->op == VOL_WRITE ? io->length : 0;
		unsigned ci = cls == Q_READ ? C_READ_IOPS : C_WRITE_IOPS;
		uint64_t t[4] = {
			cell_reserve(&q->cells[C_IOPS], now, ops),
			cell_reserve(&q->cells[C_BW], now, bytes),
			cell_reserve(&q->cells[ci], now, ops),
			cell_reserve(&q->cells[ci + 1], now, bytes),
		};
		for (unsigned i = 0; i < 4; i++)
			if (t[i] > ready)
				ready = t[i];
	}
	if (ready <= now && list_empty(&rq->queue[cls]))
		return true;
	/* Behind a queued I/O even when its own tokens are there: order. */
	io->qos_ready_ns = ready;
	list_add_tail(&rq->queue[cls], &io->qos_link);
	if (rq->st) {
		STAT_ADD(rq->st->qos_delayed, 1);
		STAT_ADD(rq->st->qos_queued, 1);
	}
	rq_arm(rq, now);
	return false;
}

static void set_cell(struct qos_cell *c, uint64_t rate, uint64_t burst_ns, bool ops)
{
	uint64_t depth = burst_ns;

	/* An operation bucket holds at least one operation, or a limit below
	 * 1000/burst_ms IOPS could never let one through at once. */
	if (ops && rate && depth < NSEC_PER_SEC / rate)
		depth = NSEC_PER_SEC / rate;
	ST(&c->depth_ns, depth);
	ST(&c->rate, rate);
}

int vol_set_qos(struct volume *v, const struct vol_qos_limits *l)
{
	struct vol_qos *q = __atomic_load_n(&v->qos, __ATOMIC_ACQUIRE);
	uint64_t burst_ns;

	if (!l)
		return -EINVAL;
	if (!q) {
		unsigned nr = v->nr_stats ? v->nr_stats : 1;
		size_t size = sizeof(*q) + nr * sizeof(q->rq[0]);

		size = (size + 63) & ~(size_t)63;
		q = aligned_alloc(64, size);
		if (!q)
			return -ENOMEM;
		memset(q, 0, size);
		q->nr = nr;
		q->refs = 1;
		for (unsigned i = 0; i < nr; i++) {
			q->rq[i].q = q;
			for (unsigned j = 0; j < NR_QUEUES; j++)
				list_init(&q->rq[i].queue[j]);
			reactor_timer_init(&q->rq[i].timer, rq_release);
			q->rq[i].st = i < v->nr_stats ? &v->stats[i] : NULL;
		}
	}
	burst_ns = (uint64_t)(l->burst_ms ? l->burst_ms : 100) * NSEC_PER_MSEC;
	set_cell(&q->cells[C_IOPS], l->iops, burst_ns, true);
	set_cell(&q->cells[C_BW], l->bandwidth, burst_ns, false);
	set_cell(&q->cells[C_READ_IOPS], l->read_iops, burst_ns, true);
	set_cell(&q->cells[C_READ_BW], l->read_bandwidth, burst_ns, false);
	set_cell(&q->cells[C_WRITE_IOPS], l->write_iops, burst_ns, true);
	set_cell(&q->cells[C_WRITE_BW], l->write_bandwidth, burst_ns, false);
	ST(&q->limits.iops, l->iops);
	ST(&q->limits.bandwidth, l->bandwidth);
	ST(&q->limits.read_iops, l->read_iops);
	ST(&q->limits.read_bandwidth, l->read_bandwidth);
	ST(&q->limits.write_iops, l->write_iops);
	ST(&q->limits.write_bandwidth, l->write_bandwidth);
	ST(&q->limits.burst_ms, l->burst_ms);
	ST(&q->active, (unsigned)!!(l->iops | l->bandwidth | l->read_iops | l->read_bandwidth |
				   l->write_iops | l->write_bandwidth));
	if (!v->qos) {
		__atomic_store_n(&v->qos, q, __ATOMIC_RELEASE);
		log_info("volume %s: qos iops=%llu bandwidth=%llu read_iops=%llu "
			 "read_bandwidth=%llu write_iops=%llu write_bandwidth=%llu",
			 v->name, (unsigned long long)l->iops, (unsigned long long)l->bandwidth,
			 (unsigned long long)l->read_iops, (unsigned long long)l->read_bandwidth,
			 (unsigned long long)l->write_iops,
			 (unsigned long long)l->write_bandwidth);
	}
	return 0;
}

void vol_get_qos(const struct volume *v, struct vol_qos_limits *out)
{
	const struct vol_qos *q = __atomic_load_n(&v->qos, __ATOMIC_ACQUIRE);

	memset(out, 0, sizeof(*out));
	if (!q)
		return;
	out->iops = LD(&q->limits.iops);
	out->bandwidth = LD(&q->limits.bandwidth);
	out->read_iops = LD(&q->limits.read_iops);
	out->read_bandwidth = LD(&q->limits.read_bandwidth);
	out->write_iops = LD(&q->limits.write_iops);
	out->write_bandwidth = LD(&q->limits.write_bandwidth);
	out->burst_ms = LD(&q->limits.burst_ms);
}

void qos_free(struct volume *v)
{
	struct vol_qos *q = v->qos;

	if (!q)
		return;
	for (unsigned i = 0; i < q->nr; i++)
		for (unsigned j = 0; j < NR_QUEUES; j++)
			if (!list_empty(&q->rq[i].queue[j]))
				log_err("volume %s: destroyed with I/O waiting for QoS (a bug)",
					v->name);
	v->qos = NULL;
	qos_put(q);
}

int qos_parse_opt(const char *cmd, int opt, const char *arg, struct vol_qos_limits *l)
{
	uint64_t v;
	char *end;

	switch (opt) {
	case QOS_OPT_IOPS:
		errno = 0;
		v = strtoull(arg, &end, 10);
		if (!*arg || *end || *arg == '-' || errno) {
			fprintf(stderr, "nvmf-gateway %s: --qos-iops '%s': a number of operations "
					"per second (0 = unlimited)\n", cmd, arg);
			return -1;
		}
		l->iops = v;
		return 1;
	case QOS_OPT_BANDWIDTH:
		if (gw_parse_size(arg, &v) < 0) {
			fprintf(stderr, "nvmf-gateway %s: --qos-bandwidth '%s': bytes per second "
					"with an optional K, M, G or T (0 = unlimited)\n", cmd, arg);
			return -1;
		}
		l->bandwidth = v;
		return 1;
	}
	return 0;
}
