#include "gateway/watchdog.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "gateway/base/notify.h"
#include "gateway/base/reactor.h"

/* One per reactor, on a cache line of its own: written by its reactor,
 * read by reactor 0. */
struct wd_slot {
	_Alignas(64) _Atomic uint64_t stamp_ns;
	struct reactor_timer timer;
	struct reactor *r;
	struct watchdog *wd;
};

struct watchdog {
	uint64_t period_ns;
	unsigned n;
	struct wd_slot *slots;
	uint64_t *snap; /* reactor 0's copy of the stamps, for the decision */
	bool stalled; /* the last check found a stale reactor (log once) */
	_Atomic uint64_t pings;
};

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*v = x;
	return 0;
}

int watchdog_period_from_env(uint64_t *usec)
{
	const char *pid = getenv("WATCHDOG_PID");
	uint64_t v;

	*usec = 0;
	if (!getenv("WATCHDOG_USEC"))
		return 0;
	if (pid) {
		if (parse_u64(pid, &v) < 0)
			return -EINVAL;
		/* Meant for another process (we are a child of the one
		 * systemd started, or a leftover environment). */
		if (v != (uint64_t)getpid())
			return 0;
	}
	if (parse_u64(getenv("WATCHDOG_USEC"), &v) < 0 || v == 0)
		return -EINVAL;
	*usec = v;
	return 0;
}

bool watchdog_all_fresh(const uint64_t *stamps, unsigned n, uint64_t now_ns,
			uint64_t max_age_ns, unsigned *stale)
{
	for (unsigned i = 0; i < n; i++) {
		if (stamps[i] < now_ns && now_ns - stamps[i] > max_age_ns) {
			if (stale)
				*stale = i;
			return false;
		}
	}
	return true;
}

static void check_and_ping(struct watchdog *wd, uint64_t now)
{
	unsigned stale = 0;

	for (unsigned i = 0; i < wd->n; i++)
		wd->snap[i] = atomic_load_explicit(&wd->slots[i].stamp_ns, memory_order_acquire);
	if (!watchdog_all_fresh(wd->snap, wd->n, now, wd->period_ns / 2, &stale)) {
		if (!wd->stalled)
			log_err("watchdog: reactor %u has not run for %llu ms; no WATCHDOG=1 until it does",
				stale, (unsigned long long)((now - wd->snap[stale]) / NSEC_PER_MSEC));
		wd->stalled = true;
		return;
	}
	if (wd->stalled)
		log_notice("watchdog: every reactor runs again");
	wd->stalled = false;
	int ret = notify_send("WATCHDOG=1");
	if (ret < 0)
		log_warn("watchdog: WATCHDOG=1: %s", strerror(-ret));
	else
		atomic_fetch_add_explicit(&wd->pings, 1, memory_order_relaxed);
}

static void tick(struct reactor_timer *t)
{
	struct wd_slot *s = container_of(t, struct wd_slot, timer);
	struct watchdog *wd = s->wd;
	uint64_t now = reactor_now_ns();

	atomic_store_explicit(&s->stamp_ns, now, memory_order_release);
	if (s == &wd->slots[0])
		check_and_ping(wd, now);
	reactor_timer_arm(s->r, t, wd->period_ns / 4);
}

int watchdog_start(struct reactor *rs, unsigned n, uint64_t usec, struct watchdog **out)
{
	struct watchdog *wd;
	uint64_t now = reactor_now_ns();

	*out = NULL;
	if (!usec || !n)
		return 0;
	wd = calloc(1, sizeof(*wd));
	if (!wd)
		return -ENOMEM;
	wd->slots = aligned_alloc(_Alignof(struct wd_slot), n * sizeof(*wd->slots));
	wd->snap = calloc(n, sizeof(*wd->snap));
	if (!wd->slots || !wd->snap) {
		watchdog_free(wd);
		return -ENOMEM;
	}
	memset(wd->slots, 0, n * sizeof(*wd->slots));
	wd->n = n;
	wd->period_ns = usec * 1000;
	for (unsigned i = 0; i < n; i++) {
		struct wd_slot *s = &wd->slots[i];
		atomic_init(&s->stamp_ns, now);
		s->r = &rs[i];
		s->wd = wd;
		reactor_timer_init(&s->timer, tick);
		/* Reactor 0 pings at once: systemd counts from the start. */
		reactor_timer_arm(s->r, &s->timer, i ? wd->period_ns / 4 : 0);
	}
	log_info("watchdog: WATCHDOG=1 every %llu ms while all %u reactors run",
		 (unsigned long long)(wd->period_ns / 4 / NSEC_PER_MSEC), n);
	*out = wd;
	return 0;
}

void watchdog_free(struct watchdog *wd)
{
	if (!wd)
		return;
	if (wd->slots)
		for (unsigned i = 0; i < wd->n; i++)
			reactor_timer_cancel(&wd->slots[i].timer);
	free(wd->slots);
	free(wd->snap);
	free(wd);
}

uint64_t watchdog_pings(const struct watchdog *wd)
{
	return wd ? atomic_load_explicit(&wd->pings, memory_order_relaxed) : 0;
}
