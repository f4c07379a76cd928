#include "gateway/daemon_metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/volume/qos.h"

void daemon_metrics_gateway(struct metrics_buf *mb, const char *version, double uptime_s)
{
	metrics_gauge(mb, "nvmf_gateway_build_info", "The running nvmf-gateway's version.",
		      (const char *[]){ "version", version, NULL }, 1);
	metrics_gauge(mb, "nvmf_gateway_uptime_seconds", "Seconds since the gateway started.",
		      NULL, uptime_s);
}

#define SNAP(f) offsetof(struct vol_stats_snap, f)

static const struct {
	const char *name, *help;
	size_t off;
	bool gauge;
} export_counters[] = {
	{ .name = "nvmf_gateway_export_reads_total", .help = "Reads completed without error.", .off = SNAP(reads) },
	{ .name = "nvmf_gateway_export_writes_total", .help = "Writes completed without error.", .off = SNAP(writes) },
	{ .name = "nvmf_gateway_export_read_bytes_total", .help = "Bytes read.", .off = SNAP(read_bytes) },
	{ .name = "nvmf_gateway_export_write_bytes_total", .help = "Bytes written.", .off = SNAP(write_bytes) },
	{ .name = "nvmf_gateway_export_flushes_total", .help = "Flushes completed without error.", .off = SNAP(flushes) },
	{ .name = "nvmf_gateway_export_errors_total", .help = "I/O completed with an error.", .off = SNAP(errors) },
	{ .name = "nvmf_gateway_export_retries_total", .help = "Commands resent by the NVMe layer.", .off = SNAP(retries) },
	{ .name = "nvmf_gateway_export_in_flight", .help = "I/O submitted and not yet completed.", .off = SNAP(in_flight), .gauge = true },
	{ .name = "nvmf_gateway_export_qos_delayed_total", .help = "I/O that waited for QoS tokens.", .off = SNAP(qos_delayed) },
	{ "nvmf_gateway_export_qos_queued", "I/O waiting for QoS tokens now.", SNAP(qos_queued),
	  true },
};

#define LIM(f) offsetof(struct vol_qos_limits, f)

static const struct {
	const char *name, *help;
	size_t off;
} export_limits[] = {
	{ .name = "nvmf_gateway_export_qos_iops_limit", .help = "QoS limit on reads+writes per second (0: none).", .off = LIM(iops) },
	{ .name = "nvmf_gateway_export_qos_bandwidth_limit_bytes", .help = "QoS limit on bytes read+written per second (0: none).", .off = LIM(bandwidth) },
	{ .name = "nvmf_gateway_export_qos_read_iops_limit", .help = "QoS limit on reads per second (0: none).", .off = LIM(read_iops) },
	{ .name = "nvmf_gateway_export_qos_read_bandwidth_limit_bytes", .help = "QoS limit on bytes read per second (0: none).", .off = LIM(read_bandwidth) },
	{ .name = "nvmf_gateway_export_qos_write_iops_limit", .help = "QoS limit on writes per second (0: none).", .off = LIM(write_iops) },
	{ .name = "nvmf_gateway_export_qos_write_bandwidth_limit_bytes", .help = "QoS limit on bytes written per second (0: none).", .off = LIM(write_bandwidth) },
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

int daemon_metrics_exports(struct metrics_buf *mb, const struct dm_export *e, size_t n)
{
	/* One snapshot per export up front: every family then reports the
	 * same moment, and each volume is scanned once. */
	struct vol_stats_snap *snap = n ? calloc(n, sizeof(*snap)) : NULL;
	struct vol_qos_limits *lim = n ? calloc(n, sizeof(*lim)) : NULL;

	if (n && (!snap || !lim)) {
		free(snap);
		free(lim);
		mb->nomem = true;
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		if (e[i].vol) {
			vol_stats_snapshot(e[i].vol, &snap[i]);
			vol_get_qos(e[i].vol, &lim[i]);
		}
	for (size_t i = 0; i < n; i++)
		metrics_gauge(mb, "nvmf_gateway_export_up", "1 when the export is running.",
			      (const char *[]){ "export", e[i].name, "target", e[i].target, NULL },
			      e[i].vol ? 1 : 0);
	for (size_t i = 0; i < n; i++)
		if (e[i].vol)
			metrics_gauge(mb, "nvmf_gateway_export_size_bytes", "Size of the export.",
				      (const char *[]){ "export", e[i].name, NULL },
				      (double)vol_size(e[i].vol));
	for (size_t c = 0; c < N(export_counters); c++)
		for (size_t i = 0; i < n; i++) {
			const char *labels[] = { "export", e[i].name, NULL };
			uint64_t v = *(const uint64_t *)((const char *)&snap[i] +
							 export_counters[c].off);
			if (!e[i].vol)
				continue;
			if (export_counters[c].gauge)
				metrics_gauge(mb, export_counters[c].name, export_counters[c].help,
					      labels, (double)v);
			else
				metrics_counter(mb, export_counters[c].name,
						export_counters[c].help, labels, v);
		}
	for (size_t c = 0; c < N(export_limits); c++)
		for (size_t i = 0; i < n; i++)
			if (e[i].vol)
				metrics_gauge(mb, export_limits[c].name, export_limits[c].help,
					      (const char *[]){ "export", e[i].name, NULL },
					      (double)*(const uint64_t *)((const char *)&lim[i] +
									  export_limits[c].off));
	for (size_t i = 0; i < n; i++)
		if (e[i].vol)
			metrics_histogram_seconds(mb, "nvmf_gateway_export_read_latency_seconds",
						  "Read latency, submission to completion, QoS "
						  "wait included.",
						  (const char *[]){ "export", e[i].name, NULL },
						  &snap[i].read_lat);
	for (size_t i = 0; i < n; i++)
		if (e[i].vol)
			metrics_histogram_seconds(mb, "nvmf_gateway_export_write_latency_seconds",
						  "Write latency, submission to completion, QoS "
						  "wait included.",
						  (const char *[]){ "export", e[i].name, NULL },
						  &snap[i].write_lat);
	free(snap);
	free(lim);
	return 0;
}

#define PATH(f) offsetof(struct dm_path, f)

static const struct {
	const char *name, *help;
	size_t off;
	bool gauge;
} path_counters[] = {
	{ .name = "nvmf_gateway_path_reads_total", .help = "Reads completed on this path.", .off = PATH(reads) },
	{ .name = "nvmf_gateway_path_writes_total", .help = "Writes completed on this path.", .off = PATH(writes) },
	{ .name = "nvmf_gateway_path_read_bytes_total", .help = "Bytes read on this path.", .off = PATH(read_bytes) },
	{ .name = "nvmf_gateway_path_write_bytes_total", .help = "Bytes written on this path.", .off = PATH(write_bytes) },
	{ .name = "nvmf_gateway_path_errors_total", .help = "Commands failed on this path.", .off = PATH(errors) },
	{ .name = "nvmf_gateway_path_retries_total", .help = "Commands retried from this path.", .off = PATH(retries) },
	{ .name = "nvmf_gateway_path_reconnects_total", .help = "Reconnects of this path's controller.", .off = PATH(reconnects) },
	{ "nvmf_gateway_path_in_flight", "Commands outstanding on this path.", PATH(in_flight),
	  true },
};

static const char *const path_states[] = { "new", "connecting", "live", "resetting",
					    "deleting", "dead", NULL };
static const char *const ana_states[] = { "optimized", "non-optimized", "inaccessible",
					  "persistent-loss", "change", "unknown", NULL };

static void enum_gauge(struct metrics_buf *mb, const char *name, const char *help,
		       const char *label, const char *const *values, const struct dm_path *p,
		       size_t n, size_t state_off)
{
	for (size_t i = 0; i < n; i++) {
		char idx[16];
		const char *cur = *(const char *const *)((const char *)&p[i] + state_off);

		snprintf(idx, sizeof(idx), "%u", p[i].index);
		for (const char *const *v = values; *v; v++)
			metrics_gauge(mb, name, help,
				      (const char *[]){ "target", p[i].target, "path", idx, label,
							*v, NULL },
				      cur && !strcmp(cur, *v) ? 1 : 0);
	}
}

void daemon_metrics_paths(struct metrics_buf *mb, const struct dm_path *p, size_t n)
{
	char idx[16];

	for (size_t i = 0; i < n; i++) {
		snprintf(idx, sizeof(idx), "%u", p[i].index);
		metrics_gauge(mb, "nvmf_gateway_path_info", "A path of a target (always 1).",
			      (const char *[]){ "target", p[i].target, "path", idx, "transport",
						p[i].transport ? p[i].transport : "",
						"traddr", p[i].traddr ? p[i].traddr : "",
						"trsvcid", p[i].trsvcid ? p[i].trsvcid : "", NULL },
			      1);
	}
	enum_gauge(mb, "nvmf_gateway_path_state", "Controller state of the path (1: current).",
		   "state", path_states, p, n, PATH(state));
	enum_gauge(mb, "nvmf_gateway_path_ana_state", "ANA state of the path (1: current).",
		   "ana_state", ana_states, p, n, PATH(ana_state));
	for (size_t c = 0; c < N(path_counters); c++)
		for (size_t i = 0; i < n; i++) {
			uint64_t v = *(const uint64_t *)((const char *)&p[i] + path_counters[c].off);

			snprintf(idx, sizeof(idx), "%u", p[i].index);
			const char *labels[] = { "target", p[i].target, "path", idx, NULL };
			if (path_counters[c].gauge)
				metrics_gauge(mb, path_counters[c].name, path_counters[c].help,
					      labels, (double)v);
			else
				metrics_counter(mb, path_counters[c].name, path_counters[c].help,
						labels, v);
		}
}
