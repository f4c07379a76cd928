/* Intrusive doubly linked list: a request is on exactly one list at a time
 * (free, queued, in flight), and moving it never allocates. */
#ifndef GW_LIST_H
#define GW_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct list_node {
	struct list_node *next, *prev;
};

#define LIST_INIT(name) { &(name), &(name) }
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

static inline void list_init(struct list_node *h) { h->next = h->prev = h; }
static inline bool list_empty(const struct list_node *h) { return h->next == h; }

static inline void list_add_between(struct list_node *n, struct list_node *p,
				    struct list_node *x)
{
	n->prev = p;
	n->next = x;
	p->next = n;
	x->prev = n;
}
static inline void list_add_tail(struct list_node *h, struct list_node *n)
{
	list_add_between(n, h->prev, h);
}
static inline void list_add_head(struct list_node *h, struct list_node *n)
{
	list_add_between(n, h, h->next);
}
static inline void list_del(struct list_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}
static inline struct list_node *list_pop(struct list_node *h)
{
	struct list_node *n = h->next;
	if (n == h)
		return NULL;
	list_del(n);
	return n;
}
static inline size_t list_len(const struct list_node *h)
{
	size_t n = 0;
	for (const struct list_node *p = h->next; p != h; p = p->next)
		n++;
	return n;
}

#define list_for_each_safe(pos, tmp, head)                              \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); \
	     (pos) = (tmp), (tmp) = (pos)->next)

#endif
