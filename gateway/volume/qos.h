/* Per-export QoS: token buckets in the volume layer, so every exporter
 * (NBD socket, kernel NBD, FUSE) and every backend is held to the same
 * limits, and a noisy export cannot take another export's share of the
 * target.  An I/O over the limit waits, in submission order per reactor,
 * and is never rejected; its latency (vol_stats) includes the wait. */
#ifndef GW_QOS_H
#define GW_QOS_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway/volume/volume.h"

/* Every field 0 = unlimited.  An I/O takes from every bucket that applies
 * to it: a read from iops, bandwidth, read_iops and read_bandwidth.  Reads
 * and writes count one operation each and their length in bytes; write
 * zeroes and trim count one write operation and no bytes (they carry no
 * data); flush costs nothing but keeps its place behind queued writes. */
struct vol_qos_limits {
	uint64_t iops, bandwidth; /* reads and writes together; bytes/s */
	uint64_t read_iops, read_bandwidth;
	uint64_t write_iops, write_bandwidth;
	/* How much an idle export may burst: the buckets hold this many ms
	 * of their rate (at least one operation).  0 = 100 ms. */
	uint32_t burst_ms;
};

/* Sets or changes the limits; from any thread.  The first call must come
 * before I/O is submitted (it allocates the per-reactor queues); later
 * calls may change the rates under load (queued I/O keeps the start time
 * it was given).  0 or -ENOMEM / -EINVAL. */
int vol_set_qos(struct volume *v, const struct vol_qos_limits *l);
/* The limits in force (all zero without vol_set_qos). */
void vol_get_qos(const struct volume *v, struct vol_qos_limits *out);

/* The quick commands' options (nbd, mount): put QOS_LONGOPTS in the
 * getopt table and QOS_HELP in the usage text, and hand other option
 * codes to qos_parse_opt: 1 = taken, 0 = not a QoS option, -1 = a bad
 * value (printed to stderr with cmd). */
#define QOS_OPT_IOPS 3900
#define QOS_OPT_BANDWIDTH 3901
#define QOS_LONGOPTS                                                    \
	{ "qos-iops", required_argument, 0, QOS_OPT_IOPS },             \
	{ "qos-bandwidth", required_argument, 0, QOS_OPT_BANDWIDTH }
#define QOS_HELP                                                              \
	"      --qos-iops N             at most N reads+writes per second\n"     \
	"      --qos-bandwidth SIZE     at most SIZE bytes/s (K/M/G/T, 1024-based)\n"
int qos_parse_opt(const char *cmd, int opt, const char *arg, struct vol_qos_limits *l);
static inline bool qos_limited(const struct vol_qos_limits *l)
{
	return l->iops | l->bandwidth | l->read_iops | l->read_bandwidth | l->write_iops |
	       l->write_bandwidth;
}

/* Used by volume.c.  From vol_submit on reactor r: true when io may go to
 * the backend now, false when it was queued (qos.c dispatches it later). */
bool qos_admit(struct volume *v, struct reactor *r, struct vol_io *io);
/* From vol_drain, any thread: sets v->draining (qos_admit lets everything
 * through from then on) and has each reactor dispatch what it queued. */
void qos_drain(struct volume *v);
/* From vol_destroy: no I/O is queued any more. */
void qos_free(struct volume *v);

#endif
