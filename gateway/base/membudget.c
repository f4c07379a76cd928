/* The buffer budget: see membudget.h. */
#include "gateway/base/membudget.h"

#include <malloc.h>

static struct membudget global = {
	.limit = MEMBUDGET_DEFAULT_BYTES,
	.stall_ns = MEMBUDGET_DEFAULT_STALL_S * 1000000000ull,
	.hook_lock = ATOMIC_FLAG_INIT,
};

void membudget_pin_allocator(void)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	/* Below the threshold (request structs, libfuse's per-message one)
	 * the heap keeps what it once held: a trim returns pages that the
	 * next allocation, on the data path, must fault back in; under
	 * reclaim that asks the kernel for memory while it waits on us.
	 * What it keeps is the high water of small allocations. */
	mallopt(M_TRIM_THRESHOLD, -1);
	/* Heaps grow in steps of 1 MiB: warm-up reaches the high water in
	 * few steps, and none is left to take while serving. */
	mallopt(M_TOP_PAD, 1024 * 1024);
}

struct membudget *membudget_global(void)
{
	return &global;
}

void membudget_init(struct membudget *b, uint64_t limit, unsigned stall_s)
{
	b->limit = limit < MEMBUDGET_MIN_BYTES ? MEMBUDGET_MIN_BYTES : limit;
	atomic_store(&b->used, 0);
	atomic_store(&b->peak, 0);
	atomic_store(&b->waiters, 0);
	atomic_store(&b->waits, 0);
	b->stall_ns = (uint64_t)(stall_s ? stall_s : MEMBUDGET_DEFAULT_STALL_S) * 1000000000ull;
	atomic_flag_clear(&b->hook_lock);
	b->hooks = NULL;
}

static void hooks_lock(struct membudget *b)
{
	while (atomic_flag_test_and_set_explicit(&b->hook_lock, memory_order_acquire))
		;
}

static void hooks_unlock(struct membudget *b)
{
	atomic_flag_clear_explicit(&b->hook_lock, memory_order_release);
}

void membudget_hook_add(struct membudget *b, struct membudget_hook *h)
{
	hooks_lock(b);
	h->next = b->hooks;
	b->hooks = h;
	hooks_unlock(b);
}

void membudget_hook_del(struct membudget *b, struct membudget_hook *h)
{
	hooks_lock(b);
	for (struct membudget_hook **p = &b->hooks; *p; p = &(*p)->next)
		if (*p == h) {
			*p = h->next;
			break;
		}
	hooks_unlock(b);
}

static void note_peak(struct membudget *b, uint64_t now)
{
	uint64_t p = atomic_load_explicit(&b->peak, memory_order_relaxed);

	while (now > p &&
	       !atomic_compare_exchange_weak_explicit(&b->peak, &p, now, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

void membudget_charge(struct membudget *b, uint64_t n)
{
	note_peak(b, atomic_fetch_add_explicit(&b->used, n, memory_order_relaxed) + n);
}

bool membudget_take(struct membudget *b, uint64_t n)
{
	uint64_t u = atomic_load_explicit(&b->used, memory_order_relaxed);

	do {
		if (u && u + n > b->limit)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&b->used, &u, u + n,
							memory_order_relaxed,
							memory_order_relaxed));
	note_peak(b, u + n);
	return true;
}

void membudget_give(struct membudget *b, uint64_t n)
{
	atomic_fetch_sub_explicit(&b->used, n, memory_order_relaxed);
}

void membudget_wait_begin(struct membudget *b)
{
	atomic_fetch_add_explicit(&b->waiters, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&b->waits, 1, memory_order_relaxed);
	hooks_lock(b);
	for (struct membudget_hook *h = b->hooks; h; h = h->next)
		h->fn(h);
	hooks_unlock(b);
}

void membudget_wait_end(struct membudget *b)
{
	atomic_fetch_sub_explicit(&b->waiters, 1, memory_order_relaxed);
}

uint64_t membudget_conn_cap(const struct membudget *b, uint64_t max_req)
{
	uint64_t cap = b->limit / 4;

	if (cap > (64ull << 20))
		cap = 64ull << 20;
	if (cap < max_req)
		cap = max_req;
	return cap;
}
