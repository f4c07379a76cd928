/* What the daemon exports on its Prometheus endpoint, kept apart from the
 * daemon so that it can be fed from plain arrays (and unit-tested): the
 * daemon builds the arrays in its fill callback and calls these in order. */
#ifndef GW_DAEMON_METRICS_H
#define GW_DAEMON_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/base/metrics.h"
#include "gateway/volume/volume.h"

struct dm_export {
	const char *name;
	const char *target; /* the target's name */
	struct volume *vol; /* NULL: not running (only nvmf_gateway_export_up 0) */
};

/* One path of a target, as the multipath layer reports it.  State names
 * are those of the status JSON (live, connecting, ...; optimized, ...). */
struct dm_path {
	const char *target;
	unsigned index;
	const char *transport, *traddr, *trsvcid;
	const char *state;
	const char *ana_state;
	uint64_t reads, writes, read_bytes, write_bytes, errors, retries, reconnects;
	uint64_t in_flight;
};

/* nvmf_gateway_build_info, nvmf_gateway_uptime_seconds. */
void daemon_metrics_gateway(struct metrics_buf *mb, const char *version, double uptime_s);
/* nvmf_gateway_export_*{export="NAME"}: counters, in-flight, QoS, latency
 * histograms, from vol_stats_snapshot.  -ENOMEM or 0. */
int daemon_metrics_exports(struct metrics_buf *mb, const struct dm_export *e, size_t n);
/* nvmf_gateway_path_*{target="T",path="I"}: the multipath layer's hook. */
void daemon_metrics_paths(struct metrics_buf *mb, const struct dm_path *p, size_t n);

#endif
