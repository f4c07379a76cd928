/* A volume: one namespace as the exporters (NBD, FUSE) see it.
 *
 * Exporters submit byte-range I/O and get exactly one callback with 0 or
 * -errno, on the reactor they submitted from.  Below this line live the
 * NVMe details: splitting at MDTS, which queue of which reactor carries the
 * command, the NVMe status to errno table.  A volume is built once when its
 * backend is ready and does not change while exporters hold it; its fields
 * are read-only from every reactor.
 *
 * Backends: "nvmf" (a namespace of a multipath target, over whichever of
 * its controllers' paths is usable: vol_mp_create in mpath.h, the code in
 * mpath_io.c) and "mem" (RAM, vol_mem.c) for unit tests, fuzzers and
 * benchmarks of the exporters without a target. */
#ifndef GW_VOLUME_H
#define GW_VOLUME_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "gateway/base/histogram.h"
#include "gateway/base/membudget.h"
#include "gateway/base/pipe_sink.h"
#include "gateway/base/reactor.h"

struct nvmf_ctrl;

enum vol_op {
	VOL_READ,
	VOL_WRITE,
	VOL_FLUSH,
	VOL_WRITE_ZEROES,
	VOL_TRIM, /* deallocate: contents afterwards are undefined */
};

/* vol_io.flags */
#define VOL_IO_FUA (1u << 0) /* write / write zeroes: durable before completion */
#define VOL_IO_NO_HOLE (1u << 1) /* write zeroes: must not deallocate */
#define VOL_IO_FAST_ZERO (1u << 2) /* write zeroes: -ENOTSUP unless cheap */

/* volume.caps: what the namespace really supports, from Identify. */
#define VOL_CAP_READ_ONLY (1u << 0)
#define VOL_CAP_FLUSH (1u << 1) /* volatile write cache: FLUSH matters */
#define VOL_CAP_FUA (1u << 2)
#define VOL_CAP_TRIM (1u << 3)
#define VOL_CAP_WRITE_ZEROES (1u << 4)
/* Write zeroes may deallocate and deallocated blocks read as zeroes, so
 * zeroing costs no data transfer (NBD_CMD_FLAG_FAST_ZERO can succeed). */
#define VOL_CAP_FAST_ZERO (1u << 5)

struct vol_io;
typedef void (*vol_io_cb)(struct vol_io *io, int err);

/* Sized for the "nvmf" backend's per-I/O state; the caller owns the memory
 * (embed it in the exporter's own request: no allocation per I/O). */
#define VOL_IO_PRIV_SIZE 192

struct vol_io {
	enum vol_op op;
	uint32_t flags;
	uint64_t offset; /* bytes, multiple of block_size */
	uint64_t length; /* bytes, multiple of block_size; 0 only for FLUSH */
	const struct iovec *iov; /* READ / WRITE data, valid until cb */
	unsigned iovcnt;
	/* READ, optional: a pipe the backend may fill instead of iov (see
	 * pipe_sink.h); after a successful cb the data is in the pipe when
	 * sink->filled == length, else in iov.  NULL: iov only.
	 * WRITE, optional: the payload is in this pipe when sink->filled ==
	 * length (else in iov).  vol_submit takes it out into iov for a
	 * backend without ops->pipe_writes; the caller keeps the pipe, as it
	 * was or emptied, until cb. */
	struct pipe_sink *sink;
	vol_io_cb cb;
	void *ctx; /* the caller's */
	/* FLUSH: the caller's session's cursor of reported write losses
	 * (vol_loss_sample when the session began: see vol_note_loss), or
	 * NULL for the volume's own one. */
	uint64_t *loss_seen;
	/* Below the line. */
	struct volume *vol;
	struct reactor *origin; /* where cb runs */
	struct reactor_msg msg;
	int err;
	bool in_submit;
	bool completed; /* vol_complete ran (checked in the debug builds) */
	uint64_t start_ns; /* vol_submit's clock: latency includes QoS wait */
	uint64_t qos_ready_ns; /* when QoS lets it go */
	/* FLUSH, when submitted: the volume's loss_seq, and the losses its
	 * session had been told of (two flushes of one session in flight
	 * both fail for a loss before them, not only the first to end). */
	uint64_t loss_at, loss_seen_at;
	struct list_node qos_link; /* on its reactor's QoS queue */
	_Alignas(16) unsigned char priv[VOL_IO_PRIV_SIZE];
};

struct volume;
struct vol_qos;

/* The namespace under a volume changed while it was exported.  RESIZED:
 * v->size grew (written on reactor 0 before the call; exporters read the
 * new value from then on).  FAILED: every I/O now fails with EIO; `gone`
 * says whether the namespace was removed (the exports should go away) or
 * changed in a way that cannot be served (shrunk, another LBA format,
 * another namespace).  Runs on reactor 0. */
enum vol_event { VOL_EV_RESIZED, VOL_EV_FAILED };
typedef void (*vol_event_fn)(struct volume *v, enum vol_event ev, bool gone, void *arg);

/* Per-reactor statistics.  Only the owning reactor writes them (relaxed
 * atomic stores, so vol_stats_snapshot may read them from any thread
 * without a lock and the writer pays nothing more than a plain add). */
struct vol_stats {
	uint64_t reads, writes, read_bytes, write_bytes, flushes, errors;
	uint64_t retries; /* bumped by the backends (vol_count_retry) */
	uint64_t in_flight; /* submitted on this reactor, callback not yet run */
	uint64_t qos_delayed; /* I/Os that waited for QoS tokens */
	uint64_t qos_queued; /* waiting for QoS tokens now */
	struct hist read_lat, write_lat; /* ns, vol_submit to callback, successes */
};

struct vol_ops {
	const char *name;
	/* io is validated; run cb exactly once on io->origin, never from
	 * inside submit itself (defer instead), so that callers may submit
	 * from a completion without recursion. */
	void (*submit)(struct volume *v, struct vol_io *io);
	void (*destroy)(struct volume *v);
	/* Optional, from vol_drain (any thread): bound the I/O the backend
	 * itself holds back (waiting for a path) now that the volume's
	 * exports are going away. */
	void (*drain)(struct volume *v);
	/* submit takes a WRITE whose payload is in io->sink. */
	bool pipe_writes;
};

struct volume {
	char name[64]; /* log prefix, e.g. the export name */
	const struct vol_ops *ops;
	uint64_t size; /* bytes; read with vol_size once exported */
	uint32_t block_size; /* logical block: the smallest I/O */
	uint32_t pref_io; /* preferred I/O size (>= block_size) */
	uint32_t max_io; /* largest single vol_io the exporters should send */
	uint32_t caps; /* VOL_CAP_* */
	void *priv;
	/* Statistics: per reactor (index reactor->id), touched only there;
	 * the backend callocs nr_stats of them. */
	unsigned nr_stats;
	struct vol_stats *stats;
	/* NULL until vol_set_qos (gateway/qos.h); freed by vol_destroy. */
	struct vol_qos *qos;
	bool draining; /* atomic: vol_drain ran; QoS holds nothing back */
	/* The owner's listener for namespace changes (vol_set_event_cb). */
	vol_event_fn on_event;
	void *event_arg;
	/* Acknowledged writes that may have been lost (vol_note_loss), as
	 * errseq(9) does for writeback errors: loss_seq counts the losses,
	 * loss_reported is the newest one some flush has failed for, and
	 * each session keeps its own cursor.  All atomic. */
	uint64_t loss_seq, loss_reported, loss_anon;
	/* Bytes of I/O that wait for a usable path now, counted for the
	 * volume's whole failure domain (an "nvmf" volume: every volume of
	 * its target), which the backend keeps (vol_path_wait_add).  NULL:
	 * its I/O never waits for a path. */
	uint64_t *path_wait;
};

/* What waits for a usable path: the bytes of v's failure domain (its
 * target), and of every volume of the process.  From any thread; each
 * counter exact, the two not one snapshot.  The exporters bound the data
 * buffers such I/O pins (membudget_path_wait_over): the outage of one
 * target must not hold the buffers of the others' clients. */
static inline uint64_t vol_path_wait_bytes(const struct volume *v)
{
	return v->path_wait ? __atomic_load_n(v->path_wait, __ATOMIC_RELAXED) : 0;
}
uint64_t vol_path_wait_total(void);
/* Whether a new buffer of want bytes for more of v's I/O would pass what
 * may wait for a path (membudget_path_wait_over, in the process's budget).
 * One load while nothing of v waits, the data path's usual case; the
 * process total only when some does. */
static inline bool vol_path_wait_over(const struct volume *v, uint64_t want)
{
	uint64_t waiting = vol_path_wait_bytes(v);

	return waiting && membudget_path_wait_over(membudget_global(), waiting,
						   vol_path_wait_total(), want);
}
/* Used by the backends, from any thread: n more bytes of v's I/O wait for
 * a path (add), or no longer do (sub: sent down a path, or completed). */
void vol_path_wait_add(struct volume *v, uint64_t n);
void vol_path_wait_sub(struct volume *v, uint64_t n);

/* From reactor 0: fn(v, ev, gone, arg) on each namespace change from now
 * on (NULL: none). */
void vol_set_event_cb(struct volume *v, vol_event_fn fn, void *arg);
/* Used by the backends, on reactor 0: the namespace grew to size bytes. */
void vol_resized(struct volume *v, uint64_t size);
/* Used by the backends, on reactor 0: the volume fails from now on. */
void vol_failed(struct volume *v, bool gone);
/* Used by the backends, from any thread: writes this volume acknowledged
 * may have been lost (a path reset with its volatile cache holding them).
 * From now on a FLUSH fails with EIO, once for each session (each cursor
 * a FLUSH names in vol_io.loss_seen), and so does every FLUSH that was in
 * flight when it happened: a success never vouches for a lost write.  A
 * session that began before some flush reported the loss hears of it too,
 * as does one that began after the loss if no flush has reported it yet. */
void vol_note_loss(struct volume *v);
/* The cursor a new session of v starts with (from any thread). */
uint64_t vol_loss_sample(const struct volume *v);
/* A session of v ends with its cursor at seen: if losses happened that it
 * was not told of (or, for a session that ended abruptly, pass the cursor
 * it started with: its last EIO may never have reached the client), the
 * next new session is told of them instead (a client that reconnects and
 * resends its flush must not get a success). */
void vol_loss_session_end(struct volume *v, uint64_t seen);
/* The size now, from any thread (it only grows while exported): the one
 * way to read v->size once the volume is exported, paired with
 * vol_resized's release store. */
static inline uint64_t vol_size(const struct volume *v)
{
	return __atomic_load_n(&v->size, __ATOMIC_ACQUIRE);
}

/* A volume's statistics summed over its reactors at one moment (each
 * counter exact, the set not atomic as a whole).  Large (two histograms):
 * allocate it. */
struct vol_stats_snap {
	uint64_t reads, writes, read_bytes, write_bytes, flushes, errors, retries;
	uint64_t in_flight, qos_delayed, qos_queued;
	struct hist read_lat, write_lat; /* nanoseconds */
	struct vol_latency_us {
		uint64_t p50, p95, p99, p999;
	} read_us, write_us;
};

/* From any thread, while the volume exists.  0 or -EINVAL. */
int vol_stats_snapshot(const struct volume *v, struct vol_stats_snap *out);

/* Checks the request against the volume (alignment, range, read-only,
 * op supported) and sends it on.  0: cb will run exactly once on r.
 * -EINVAL / -EPERM / -EOPNOTSUPP / -ENOSPC: rejected, cb is not called. */
int vol_submit(struct volume *v, struct reactor *r, struct vol_io *io);

/* The volume's exports are going away (export-remove, reload, SIGTERM, an
 * unmount): nothing may hold its I/O back for longer than a command takes,
 * or the exporters' drain waits for it.  I/O waiting for QoS tokens goes
 * to the backend at once, as does every I/O submitted from now on (the
 * queue's token time is unbounded: minutes for a deep queue at a low
 * rate), and the backend bounds its own waits (ops->drain: the nvmf
 * backend's vol_mp_drain).  Nothing fails for it: the I/O completes as
 * any other.  Any thread; a second call does nothing. */
void vol_drain(struct volume *v);

/* Frees the volume; no I/O may be in flight. */
void vol_destroy(struct volume *v);

/* "flush,fua,trim,write_zeroes" into buf, for logs and status. */
const char *vol_caps_str(uint32_t caps, char *buf, unsigned len);
const char *vol_op_name(enum vol_op op);

/* A RAM volume of size bytes (a multiple of block_size), all zeroes. */
int vol_mem_create(const char *name, uint64_t size, uint32_t block_size, uint32_t caps,
		   unsigned nr_reactors, struct volume **out);
/* The RAM volume's bytes, for tests. */
uint8_t *vol_mem_data(struct volume *v);

/* A namespace of an NVMe-oF target: vol_mp_create in gateway/volume/mpath.h. */

/* Used by the backends, from the reactor `here`: runs io->cb on
 * io->origin (after recording stats), deferred when that is the caller's
 * own stack (a completion inside submit) or sent over when it is another
 * reactor. */
void vol_complete(struct reactor *here, struct vol_io *io, int err);
/* Used by the backends when they resend a command (path failure, retryable
 * status), from the reactor `here` that does it. */
void vol_count_retry(struct reactor *here, struct vol_io *io);
/* Used by qos.c: sends a validated, admitted I/O to the backend. */
void vol_dispatch(struct vol_io *io);
/* Used by the backends to hand an I/O to reactor dst and run fn there. */
void vol_forward(struct reactor *dst, struct vol_io *io, reactor_msg_fn fn);

#endif
