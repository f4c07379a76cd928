/* A volume whose namespace changes under it: the size that grows while
 * exporters hold it, and the owner told of it (gateway/daemon_ns.c). */
#include "gateway/volume/volume.h"

void vol_set_event_cb(struct volume *v, vol_event_fn fn, void *arg)
{
	v->on_event = fn;
	v->event_arg = arg;
}

void vol_resized(struct volume *v, uint64_t size)
{
	/* Exporters on other reactors read it (vol_size, vol_submit's range
	 * check) without a lock: one aligned 64-bit store. */
	__atomic_store_n(&v->size, size, __ATOMIC_RELAXED);
	if (v->on_event)
		v->on_event(v, VOL_EV_RESIZED, false, v->event_arg);
}

void vol_failed(struct volume *v, bool gone)
{
	if (v->on_event)
		v->on_event(v, VOL_EV_FAILED, gone, v->event_arg);
}
