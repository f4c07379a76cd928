#include "fuse/rmw.h"

#include <errno.h>
#include <string.h>

void rmw_plan(uint64_t off, uint64_t len, uint32_t bs, struct rmw_plan *p)
{
	uint64_t end = off + len;
	uint64_t mask = bs - 1;

	p->start = off & ~mask;
	p->end = (end + mask) & ~mask;
	p->inner_start = (off + mask) & ~mask;
	p->inner_end = end & ~mask;
	if (p->inner_end < p->inner_start)
		p->inner_end = p->inner_start; /* inside one block: nothing whole */
	p->head_partial = (off & mask) || (p->end - p->start == bs && (end & mask));
	p->tail_partial = (end & mask) && p->end - bs != p->start;
}

void rmw_merge(const struct rmw_plan *p, uint64_t off, uint64_t len, uint32_t bs, uint8_t *span,
	       const uint8_t *edge)
{
	uint64_t end = off + len;

	if (p->head_partial) {
		memcpy(span, edge, off - p->start);
		if (p->end - p->start == bs && end < p->end)
			memcpy(span + (end - p->start), edge + (end - p->start), p->end - end);
	}
	if (p->tail_partial) {
		uint64_t t = p->end - bs;
		memcpy(span + (end - p->start), edge + bs + (end - t), p->end - end);
	}
}

void rmw_zero_edges(const struct rmw_plan *p, uint64_t off, uint64_t len, uint32_t bs,
		    uint8_t *edge)
{
	uint64_t end = off + len;

	if (p->head_partial) {
		uint64_t e = end < p->start + bs ? end : p->start + bs;
		memset(edge + (off - p->start), 0, e - off);
	}
	if (p->tail_partial)
		memset(edge + bs, 0, end - (p->end - bs));
}

uint64_t rmw_chunk_max(uint64_t max_io, uint32_t bs)
{
	uint64_t m = max_io & ~(uint64_t)(bs - 1);

	return m ? m : bs;
}

static bool overlaps(const struct range_lock *a, const struct range_lock *b)
{
	return a->start < b->end && b->start < a->end;
}

static bool blocked(struct range_locks *ls, struct range_lock *l)
{
	for (struct list_node *n = ls->list.next; n != &l->link; n = n->next)
		if (overlaps(container_of(n, struct range_lock, link), l))
			return true;
	return false;
}

void range_locks_init(struct range_locks *ls)
{
	list_init(&ls->list);
	ls->waiting = 0;
}

bool range_lock(struct range_locks *ls, struct range_lock *l, uint64_t start, uint64_t end,
		range_grant_fn grant)
{
	l->start = start;
	l->end = end;
	l->grant = grant;
	list_add_tail(&ls->list, &l->link);
	l->granted = !blocked(ls, l);
	if (l->granted)
		l->grant = NULL; /* the caller goes on itself */
	else
		ls->waiting++;
	return l->granted;
}

void range_unlock(struct range_locks *ls, struct range_lock *l)
{
	struct list_node *n;

	list_del(&l->link);
	if (!ls->waiting)
		return;
	/* Decide every grant before calling any, so that each callback sees
	 * the final state of this round. */
	for (n = ls->list.next; n != &ls->list; n = n->next) {
		struct range_lock *w = container_of(n, struct range_lock, link);
		if (w->granted || blocked(ls, w))
			continue;
		w->granted = true;
		ls->waiting--;
	}
	/* A callback may lock or unlock (a submit that fails at once ends its
	 * request): rescan from the head after each one. */
	for (;;) {
		struct range_lock *w = NULL;
		for (n = ls->list.next; n != &ls->list; n = n->next) {
			struct range_lock *c = container_of(n, struct range_lock, link);
			if (c->granted && c->grant) {
				w = c;
				break;
			}
		}
		if (!w)
			break;
		range_grant_fn fn = w->grant;
		w->grant = NULL; /* once */
		fn(w);
	}
}

int rmw_errno(int vol_err)
{
	switch (-vol_err) {
	case 0:
		return 0;
	case ENOSPC:
	case EROFS:
	case ENOMEM:
	case EFBIG:
	case EDQUOT:
		return -vol_err;
	case EPERM: /* the volume's "read-only" */
		return EROFS;
	case EACCES: /* the target's Access Denied: reads too, not EROFS */
		return EACCES;
	case EOPNOTSUPP:
		return EOPNOTSUPP;
	default: /* timeouts, resets, protocol and media errors, bugs */
		return EIO;
	}
}
