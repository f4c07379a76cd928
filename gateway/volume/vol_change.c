/* A volume whose namespace changes under it: the size that grows while
 * exporters hold it, and the owner told of it (gateway/daemon_ns.c). */
#include "gateway/base/invariant.h"
#include "gateway/volume/volume.h"

void vol_set_event_cb(struct volume *v, vol_event_fn fn, void *arg)
{
	v->on_event = fn;
	v->event_arg = arg;
}

void vol_resized(struct volume *v, uint64_t size)
{
	/* Exporters on other reactors and FUSE threads read it without a
	 * lock, through vol_size only (an acquire load): this release store
	 * publishes with it whatever the backend set up before the call
	 * (multipath: the paths that still show the old size marked unusable
	 * for the volume), so an I/O that passes the range check against the
	 * new size never meets a path that would refuse it. */
	INVARIANT(size >= vol_size(v), "a volume only grows while exported");
	__atomic_store_n(&v->size, size, __ATOMIC_RELEASE);
	if (v->on_event)
		v->on_event(v, VOL_EV_RESIZED, false, v->event_arg);
}

void vol_failed(struct volume *v, bool gone)
{
	if (v->on_event)
		v->on_event(v, VOL_EV_FAILED, gone, v->event_arg);
}
