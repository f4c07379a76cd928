/* nvmf-gateway bench: a load generator in the spirit of spdk_nvme_perf,
 * on the gateway's own engine.  With --verify every block written carries
 * its LBA, a generation and the seed, and every read checks them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/config.h"
#include "gateway/base/parse.h"
#include "gateway/base/histogram.h"
#include "gateway/base/log.h"
#include "gateway/session.h"
#include "gateway/tools.h"
#include "transports/io.h"

enum workload { W_READ, W_WRITE, W_RANDREAD, W_RANDWRITE, W_RANDRW };
static const char *const wl_names[] = { "read", "write", "randread", "randwrite", "randrw" };

enum phase { PH_FILL, PH_RUN, PH_CHECK };

struct bench;
struct worker;

struct slot {
	struct nvmf_io io;
	struct iovec iov;
	struct worker *w;
	struct nvmf_queue *q;
	uint64_t unit;
	uint32_t gen;
	uint64_t start_ns;
	bool busy;
};

/* What one reactor drives: its own queues (i % nr_workers == its index), its
 * own slice of the region and its own counters, so that reactors share
 * nothing while they run; the session's reactor sums them at the end. */
struct worker {
	struct bench *b;
	struct reactor *r;
	struct slot *slots; /* slot j on queue j % nq */
	unsigned nslots, nq;
	unsigned active;
	uint64_t u0, units; /* its slice: units [u0, u0 + units) */
	uint64_t seq_next;
	uint64_t rng;
	enum phase phase;
	uint64_t phase_end_ns;
	uint64_t start_ns, elapsed_ns;
	bool stop;
	/* phase_start is starting the slots: a completion inside it (a
	 * submit that failed at once) leaves the phase's end to it. */
	bool starting;
	bool finished; /* its done message is sent: once */
	unsigned signals_seen; /* b->signals when the phase began */
	uint64_t ios, bytes, errors, mismatches, checked;
	/* Its queues' time with the target and commands completed, at the
	 * run's start, then over the run (nvmf_queue.target_ns). */
	uint64_t target_ns, cmds;
	struct hist lat;
	struct reactor_msg start_msg, done_msg;
};

struct bench {
	struct session *s;
	enum workload wl;
	uint32_t bs;
	unsigned qd;
	unsigned seconds;
	unsigned nr_reactors;
	bool verify;
	uint32_t seed;
	uint64_t size; /* region in bytes */
	uint64_t units;
	struct nvmf_ns *ns;
	struct slot *slots;
	unsigned nslots; /* not qd x nr_ioq: a lost connection zeroes nr_ioq */
	uint32_t *gens; /* per unit, 0 = never written */
	uint8_t *busy; /* per unit: an I/O in flight */
	struct worker *workers;
	unsigned nr_workers; /* with a queue each at least */
	unsigned nr_done; /* on the session's reactor */
	/* Signals so far (atomic: read on every reactor): a worker stops
	 * the phase it runs at its next completion once one came after the
	 * phase began (signals_seen); a worker's error counts as one. */
	unsigned signals;
};

static uint64_t rng_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Pattern of one LBA: a 32-byte header naming it, then seeded noise. */
struct pat_hdr {
	uint64_t magic;
	uint64_t lba;
	uint32_t gen;
	uint32_t seed;
	uint64_t rsvd;
};
#define PAT_MAGIC 0x6e766d6667776221ull

static void pattern_fill(uint8_t *p, uint32_t lba_size, uint64_t lba, uint32_t gen, uint32_t seed)
{
	struct pat_hdr h = { PAT_MAGIC, lba, gen, seed, 0 };
	uint64_t x = (lba * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)gen << 32) ^ seed ^ 1;

	memcpy(p, &h, sizeof(h));
	for (uint32_t o = sizeof(h); o + 8 <= lba_size; o += 8) {
		uint64_t v = rng_next(&x);
		memcpy(p + o, &v, 8);
	}
}

static void verify_unit(struct worker *w, struct slot *sl)
{
	struct bench *b = w->b;
	uint32_t lbas = b->ns->lba_size;
	uint8_t *want = malloc(lbas);
	uint64_t first = sl->unit * b->bs / lbas;

	for (uint32_t i = 0; i < b->bs / lbas; i++) {
		uint8_t *got = (uint8_t *)sl->iov.iov_base + (size_t)i * lbas;
		pattern_fill(want, lbas, first + i, sl->gen, b->seed);
		w->checked++;
		if (memcmp(want, got, lbas) == 0)
			continue;
		struct pat_hdr h;
		memcpy(&h, got, sizeof(h));
		if (w->mismatches++ < 10)
			fprintf(stderr,
				"verify: MISMATCH at LBA %llu (byte %llu): expected lba %llu gen %u "
				"seed %u; found magic %s lba %llu gen %u seed %u\n",
				(unsigned long long)(first + i),
				(unsigned long long)((first + i) * lbas),
				(unsigned long long)(first + i), sl->gen, b->seed,
				h.magic == PAT_MAGIC ? "ok" : "bad", (unsigned long long)h.lba,
				h.gen, h.seed);
	}
	free(want);
}

static bool want_read(struct worker *w)
{
	switch (w->b->wl) {
	case W_READ:
	case W_RANDREAD:
		return true;
	case W_RANDRW:
		return rng_next(&w->rng) & 1;
	default:
		return false;
	}
}

static void slot_start(struct slot *sl);
static void phase_next(struct worker *w);

static void slot_done(struct nvmf_io *io, int err)
{
	struct slot *sl = io->ctx;
	struct worker *w = sl->w;
	struct bench *b = w->b;
	uint64_t now = reactor_now_ns();

	b->busy[sl->unit] = 0;
	sl->busy = false;
	w->active--;
	if (err) {
		if (w->errors++ < 10)
			fprintf(stderr, "bench: %s at byte %llu failed: %s\n",
				io->op == NVMF_IO_READ ? "read" : "write",
				(unsigned long long)io->offset, strerror(-err));
		w->stop = true;
		__atomic_fetch_add(&b->signals, 1, __ATOMIC_RELAXED);
	} else if (io->op == NVMF_IO_WRITE) {
		if (b->gens)
			b->gens[sl->unit] = sl->gen;
	} else if (b->verify && sl->gen) {
		verify_unit(w, sl);
	}
	if (w->phase == PH_RUN && !err) {
		w->ios++;
		w->bytes += b->bs;
		hist_record(&w->lat, now - sl->start_ns);
	}
	if (w->phase == PH_RUN && now >= w->phase_end_ns)
		w->stop = true;
	/* A signal ends the phase under way, as with one reactor: an
	 * interrupted run still has everything written read back, which a
	 * second signal ends too. */
	if (__atomic_load_n(&b->signals, __ATOMIC_RELAXED) != w->signals_seen)
		w->stop = true;
	if (!w->stop && (w->phase == PH_RUN || w->seq_next < w->u0 + w->units)) {
		slot_start(sl);
		return;
	}
	if (w->active == 0 && !w->starting)
		phase_next(w);
}

/* Picks the next unit of the worker's slice and the direction for this
 * phase; false when the phase has nothing left for this slot. */
static bool pick(struct worker *w, struct slot *sl, bool *is_read)
{
	struct bench *b = w->b;
	bool rnd = b->wl >= W_RANDREAD;
	uint64_t end = w->u0 + w->units;

	if (w->phase != PH_RUN) {
		while (w->seq_next < end && w->phase == PH_CHECK && !b->gens[w->seq_next])
			w->seq_next++;
		if (w->seq_next >= end)
			return false;
		sl->unit = w->seq_next++;
		*is_read = w->phase == PH_CHECK;
		return true;
	}
	*is_read = want_read(w);
	for (unsigned tries = 0; tries < 64; tries++) {
		uint64_t u = w->u0 + (rnd ? rng_next(&w->rng) : w->seq_next++ - w->u0) % w->units;
		/* Two I/Os in flight on one block would make its content
		 * depend on their order: never. */
		if (!b->busy[u]) {
			sl->unit = u;
			return true;
		}
	}
	return false;
}

static void slot_start(struct slot *sl)
{
	struct worker *w = sl->w;
	struct bench *b = w->b;
	bool is_read;

	if (w->stop || !pick(w, sl, &is_read)) {
		if (w->active == 0 && !w->starting)
			phase_next(w);
		return;
	}
	b->busy[sl->unit] = 1;
	sl->busy = true;
	memset(&sl->io, 0, sizeof(sl->io));
	sl->io.op = is_read ? NVMF_IO_READ : NVMF_IO_WRITE;
	sl->io.offset = sl->unit * b->bs;
	sl->io.len = b->bs;
	sl->iov.iov_len = b->bs;
	sl->io.iov = &sl->iov;
	sl->io.iovcnt = 1;
	sl->io.cb = slot_done;
	sl->io.ctx = sl;
	if (is_read) {
		sl->gen = b->gens ? b->gens[sl->unit] : 0;
	} else if (b->verify) {
		sl->gen = b->gens[sl->unit] + 1;
		uint32_t lbas = b->ns->lba_size;
		uint64_t first = sl->unit * b->bs / lbas;
		for (uint32_t i = 0; i < b->bs / lbas; i++)
			pattern_fill((uint8_t *)sl->iov.iov_base + (size_t)i * lbas, lbas, first + i,
				     sl->gen, b->seed);
	}
	sl->start_ns = reactor_now_ns();
	w->active++;
	int ret = nvmf_io_submit(sl->q, b->ns, b->s->ctrl.max_xfer, &sl->io);
	if (ret < 0)
		slot_done(&sl->io, ret);
}

/* Sums over the worker's queues (on its reactor): their time with the
 * target, and commands. */
static void queue_sums(const struct worker *w, uint64_t *target_ns, uint64_t *cmds)
{
	*target_ns = *cmds = 0;
	/* Its own queues, from its own slots: the controller's count of
	 * queues is another reactor's to change. */
	for (unsigned j = 0; j < w->nq; j++) {
		*target_ns += w->slots[j].q->target_ns;
		*cmds += w->slots[j].q->nr_completed;
	}
}

static void report(struct bench *b)
{
	struct session *s = b->s;
	uint64_t ios = 0, bytes = 0, errors = 0, mismatches = 0, checked = 0, target_ns = 0,
		 cmds = 0, elapsed_ns = 0;
	struct hist lat;

	hist_init(&lat);
	for (unsigned i = 0; i < b->nr_workers; i++) {
		const struct worker *w = &b->workers[i];
		ios += w->ios;
		bytes += w->bytes;
		errors += w->errors;
		mismatches += w->mismatches;
		checked += w->checked;
		target_ns += w->target_ns;
		cmds += w->cmds;
		hist_merge(&lat, &w->lat);
		/* The longest run: the rates are then never flattered. */
		if (w->elapsed_ns > elapsed_ns)
			elapsed_ns = w->elapsed_ns;
	}
	double secs = (double)elapsed_ns / 1e9;
	double iops = secs > 0 ? (double)ios / secs : 0;
	double mibs = secs > 0 ? (double)bytes / secs / (1024.0 * 1024) : 0;
	/* Per I/O: the time its commands were with the target (where the
	 * transport measures it, else 0), and how many commands it took. */
	double tgt_us = ios ? (double)target_ns / (double)ios / 1e3 : 0;
	double cpi = ios ? (double)cmds / (double)ios : 0;

	if (s->json) {
		printf("{\"transport\": \"%s\", \"traddr\": \"%s\", \"trsvcid\": \"%s\", "
		       "\"subnqn\": \"%s\", \"nsid\": %u, \"workload\": \"%s\", \"bs\": %u, "
		       "\"qd\": %u, \"queues\": %u, \"reactors\": %u, \"seconds\": %.3f, "
		       "\"ios\": %llu, \"iops\": %.1f, \"mibps\": %.2f, \"lat_us\": {\"mean\": %.1f, "
		       "\"p50\": %.1f, \"p99\": %.1f, \"p99.9\": %.1f, \"max\": %.1f}, "
		       "\"target_us\": %.1f, \"cmds_per_io\": %.2f, "
		       "\"errors\": %llu, \"verify\": %s, \"checked\": %llu, \"mismatches\": %llu, "
		       "\"reactor_ios\": [",
		       nvmf_trtype_name(s->opts.path.trtype), s->opts.path.traddr,
		       s->opts.path.trsvcid, s->opts.subnqn, s->nsid, wl_names[b->wl], b->bs, b->qd,
		       s->ctrl.nr_ioq, b->nr_workers, secs, (unsigned long long)ios, iops, mibs,
		       hist_mean(&lat) / 1e3, (double)hist_percentile(&lat, 50) / 1e3,
		       (double)hist_percentile(&lat, 99) / 1e3,
		       (double)hist_percentile(&lat, 99.9) / 1e3, (double)hist_max(&lat) / 1e3,
		       tgt_us, cpi, (unsigned long long)errors, b->verify ? "true" : "false",
		       (unsigned long long)checked, (unsigned long long)mismatches);
		for (unsigned i = 0; i < b->nr_workers; i++)
			printf("%s%llu", i ? ", " : "", (unsigned long long)b->workers[i].ios);
		printf("]}\n");
		return;
	}
	printf("bench: %s %s:%s %s nsid %u: %s bs %u qd %u x %u queue(s) on %u reactor(s), "
	       "%.1f s\n",
	       nvmf_trtype_name(s->opts.path.trtype), s->opts.path.traddr, s->opts.path.trsvcid,
	       s->opts.subnqn, s->nsid, wl_names[b->wl], b->bs, b->qd, s->ctrl.nr_ioq,
	       b->nr_workers, secs);
	printf("  IOPS %.0f  MiB/s %.2f  lat(us) avg %.1f p50 %.1f p99 %.1f p99.9 %.1f max %.1f\n",
	       iops, mibs, hist_mean(&lat) / 1e3, (double)hist_percentile(&lat, 50) / 1e3,
	       (double)hist_percentile(&lat, 99) / 1e3, (double)hist_percentile(&lat, 99.9) / 1e3,
	       (double)hist_max(&lat) / 1e3);
	if (target_ns)
		printf("  with the target: %.1f us per I/O (%.2f commands each)\n", tgt_us, cpi);
	if (b->verify)
		printf("  verify: %llu blocks checked, %llu mismatches%s\n",
		       (unsigned long long)checked, (unsigned long long)mismatches,
		       mismatches ? "  FAILED" : "");
	if (errors)
		printf("  errors: %llu\n", (unsigned long long)errors);
}

static void phase_start(struct worker *w, enum phase p)
{
	w->phase = p;
	w->seq_next = w->u0;
	w->stop = false;
	w->signals_seen = __atomic_load_n(&w->b->signals, __ATOMIC_RELAXED);
	if (p == PH_RUN) {
		w->start_ns = reactor_now_ns();
		w->phase_end_ns = w->start_ns + (uint64_t)w->b->seconds * NSEC_PER_SEC;
		queue_sums(w, &w->target_ns, &w->cmds);
	}
	w->starting = true;
	for (unsigned i = 0; i < w->nslots && !w->stop; i++)
		slot_start(&w->slots[i]);
	w->starting = false;
	/* Every submit failed at once, or there was nothing to do. */
	if (w->active == 0)
		phase_next(w);
}

/* On the session's reactor: one more worker is through; the last one
 * reports and ends the session. */
static void worker_done(struct reactor_msg *m)
{
	struct worker *w = container_of(m, struct worker, done_msg);
	struct bench *b = w->b;
	uint64_t bad = 0;

	if (++b->nr_done < b->nr_workers)
		return;
	for (unsigned i = 0; i < b->nr_workers; i++)
		bad += b->workers[i].errors + b->workers[i].mismatches;
	report(b);
	session_finish(b->s, bad ? 1 : 0);
}

static void worker_finish(struct worker *w)
{
	if (w->finished)
		return;
	w->finished = true;
	w->done_msg.fn = worker_done;
	/* The mailbox takes a message from the session's own reactor too:
	 * never run inline, so a worker never ends inside its own phase. */
	reactor_send_msg(&w->b->s->r, &w->done_msg);
}

static void run_end(struct worker *w)
{
	uint64_t t, c;

	w->elapsed_ns = reactor_now_ns() - w->start_ns;
	queue_sums(w, &t, &c);
	w->target_ns = t - w->target_ns;
	w->cmds = c - w->cmds;
}

static void phase_next(struct worker *w)
{
	if (w->errors) {
		if (w->phase == PH_RUN)
			run_end(w);
		worker_finish(w);
		return;
	}
	switch (w->phase) {
	case PH_FILL:
		/* A fill cut short leaves nothing to measure. */
		if (__atomic_load_n(&w->b->signals, __ATOMIC_RELAXED) != w->signals_seen)
			break;
		phase_start(w, PH_RUN);
		return;
	case PH_RUN:
		run_end(w);
		if (w->b->verify) {
			phase_start(w, PH_CHECK);
			return;
		}
		break;
	case PH_CHECK:
		break;
	}
	worker_finish(w);
}

static void worker_begin(struct reactor_msg *m)
{
	struct worker *w = container_of(m, struct worker, start_msg);
	bool reads = w->b->wl == W_READ || w->b->wl == W_RANDREAD || w->b->wl == W_RANDRW;

	/* Reads need known content to verify: write the slice first. */
	phase_start(w, w->b->verify && reads ? PH_FILL : PH_RUN);
}

static void bench_signal(struct session *s)
{
	struct bench *b = s->priv;

	__atomic_fetch_add(&b->signals, 1, __ATOMIC_RELAXED);
}

static void bench_job(struct session *s)
{
	struct bench *b = s->priv;
	struct nvmf_ctrl *c = &s->ctrl;

	b->ns = nvmf_ctrl_find_ns(c, s->nsid);
	if (!b->ns) {
		log_err("nsid %u is not an active namespace of %s", s->nsid, s->opts.subnqn);
		session_finish(s, 1);
		return;
	}
	if (b->bs % b->ns->lba_size) {
		log_err("block size %u is not a multiple of the LBA size %u", b->bs, b->ns->lba_size);
		session_finish(s, 1);
		return;
	}
	uint64_t nsbytes = b->ns->nsze << b->ns->lba_shift;
	if (!b->size)
		b->size = b->verify && nsbytes > (64ull << 20) ? 64ull << 20 : nsbytes;
	if (b->size > nsbytes)
		b->size = nsbytes;
	b->units = b->size / b->bs;
	/* A reactor drives the queues i with i % nr_reactors == its index
	 * (session.c puts them there): with fewer queues granted than
	 * reactors, the reactors without one sit out. */
	b->nr_workers = b->nr_reactors < c->nr_ioq ? b->nr_reactors : c->nr_ioq;
	if (!b->nr_workers) {
		log_err("no I/O queue");
		session_finish(s, 1);
		return;
	}
	if (b->units < b->nr_workers) {
		log_err("region smaller than one block of %u bytes per reactor", b->bs);
		session_finish(s, 1);
		return;
	}
	unsigned nslots = b->qd * c->nr_ioq;
	b->slots = calloc(nslots, sizeof(*b->slots));
	b->nslots = b->slots ? nslots : 0;
	b->workers = calloc(b->nr_workers, sizeof(*b->workers));
	b->busy = calloc(b->units, 1);
	if (b->verify)
		b->gens = calloc(b->units, sizeof(*b->gens));
	if (!b->slots || !b->workers || !b->busy || (b->verify && !b->gens)) {
		session_finish(s, 1);
		return;
	}
	for (unsigned i = 0; i < nslots; i++) {
		b->slots[i].iov.iov_base = aligned_alloc(4096, (b->bs + 4095) / 4096 * 4096);
		if (!b->slots[i].iov.iov_base) {
			session_finish(s, 1);
			return;
		}
		memset(b->slots[i].iov.iov_base, 0, b->bs);
	}
	/* Worker k: queues k, k + W, ..., qd slots on each, and the k-th
	 * slice of the region. */
	unsigned used = 0;
	for (unsigned k = 0; k < b->nr_workers; k++) {
		struct worker *w = &b->workers[k];
		unsigned nq = (c->nr_ioq - k + b->nr_workers - 1) / b->nr_workers;
		w->b = b;
		w->r = c->ioq[k].r;
		w->slots = &b->slots[used];
		w->nq = nq;
		w->nslots = nq * b->qd;
		for (unsigned j = 0; j < w->nslots; j++) {
			w->slots[j].w = w;
			w->slots[j].q = &c->ioq[k + (j % nq) * b->nr_workers];
		}
		used += w->nslots;
		w->u0 = b->units * k / b->nr_workers;
		w->units = b->units * (k + 1) / b->nr_workers - w->u0;
		w->rng = 0x2545f4914f6cdd1dull ^ b->seed ^ ((uint64_t)k << 32);
		hist_init(&w->lat);
	}
	for (unsigned k = 0; k < b->nr_workers; k++) {
		struct worker *w = &b->workers[k];
		w->start_msg.fn = worker_begin;
		reactor_send_msg(w->r, &w->start_msg);
	}
}

int cmd_bench(int argc, char **argv)
{
	static const struct option longopts[] = {
		SESSION_LONGOPTS,
		{ "workload", required_argument, 0, 'w' },
		{ "block-size", required_argument, 0, 'b' },
		{ "queue-depth", required_argument, 0, 'd' },
		{ "queues", required_argument, 0, 'j' },
		{ "reactors", required_argument, 0, 2003 },
		{ "time", required_argument, 0, 'T' },
		{ "verify", no_argument, 0, 2000 },
		{ "seed", required_argument, 0, 2001 },
		{ "size", required_argument, 0, 2002 },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct session s;
	struct bench b = { .wl = W_RANDREAD, .bs = 4096, .qd = 32, .seconds = 10, .seed = 1,
			   .nr_reactors = 1 };
	static struct session_extras extras; /* 63 reactors: not on the stack */
	bool queues_set = false;
	int opt, rc;
	uint64_t v;

	session_defaults(&s, "4420");
	while ((opt = getopt_long(argc, argv, SESSION_SHORTOPTS "vhw:b:d:j:T:", longopts, NULL)) !=
	       -1) {
		switch (opt) {
		case 'h':
			printf("usage: nvmf-gateway bench -t tcp -a ADDR [-s PORT] -n NQN [--nsid N]\n"
			       "         [-w read|write|randread|randwrite|randrw] [-b SIZE] [-d QD]\n"
			       "         [-j QUEUES] [--reactors N] [-T SECONDS] [--verify [--seed N] [--size SIZE]] "
			       "[-o json]\n\n"
			       "  -w, --workload W        (default randread)\n"
			       "  -b, --block-size SIZE   bytes per I/O, k/m suffixes (default 4k)\n"
			       "  -d, --queue-depth QD    I/Os in flight per queue (default 32)\n"
			       "  -j, --queues N          I/O queues (default 1, or one per reactor)\n"
			       "      --reactors N        threads driving the queues, each its own "
			       "share of them\n"
			       "                          and of the region (default 1)\n"
			       "  -T, --time SECONDS      (default 10)\n"
			       "      --verify            write a pattern naming each LBA, check every "
			       "read, then read the region back\n"
			       "      --size SIZE         region to use (default the namespace; 64M with "
			       "--verify)\n\n" SESSION_HELP);
			return 0;
		case 'w': {
			unsigned i;
			for (i = 0; i < 5 && strcmp(optarg, wl_names[i]); i++)
				;
			if (i == 5) {
				fprintf(stderr, "nvmf-gateway: unknown workload '%s'\n", optarg);
				return 1;
			}
			b.wl = (enum workload)i;
			break;
		}
		case 'b':
			if (gw_parse_size(optarg, &v) < 0 || v < 512 || v > (64u << 20) || v % 512) {
				fprintf(stderr, "nvmf-gateway: block size '%s': 512 to 64M, multiple of 512\n",
					optarg);
				return 1;
			}
			b.bs = (uint32_t)v;
			break;
		case 'd':
		case 'T':
		case 2001: {
			char *end;
			unsigned long n = strtoul(optarg, &end, 10);
			if (!*optarg || *end || n == 0 || n > (opt == 'd' ? 4096ul : 1000000ul)) {
				fprintf(stderr, "nvmf-gateway: bad value '%s'\n", optarg);
				return 1;
			}
			if (opt == 'd')
				b.qd = (unsigned)n;
			else if (opt == 'T')
				b.seconds = (unsigned)n;
			else
				b.seed = (uint32_t)n;
			break;
		}
		case 'j':
			if (session_parse_opt(&s, 'i', optarg) <= 0)
				return 1;
			queues_set = true;
			break;
		case 2000:
			b.verify = true;
			break;
		case 2003: {
			char *end;
			unsigned long n = strtoul(optarg, &end, 10);
			if (!*optarg || *end || n < 1 || n > 1 + SESSION_MAX_EXTRA) {
				fprintf(stderr, "nvmf-gateway bench: --reactors '%s': 1 to %u\n", optarg,
					1 + SESSION_MAX_EXTRA);
				return 1;
			}
			b.nr_reactors = (unsigned)n;
			break;
		}
		case 2002:
			if (gw_parse_size(optarg, &v) < 0 || !v) {
				fprintf(stderr, "nvmf-gateway: bad size '%s'\n", optarg);
				return 1;
			}
			b.size = v;
			break;
		default:
			if (session_parse_opt(&s, opt, optarg) <= 0)
				return 1;
			queues_set |= opt == 'i';
		}
	}
	/* Every slot needs a request, and a split I/O more than one. */
	if (b.qd > s.opts.queue_size - 1)
		s.opts.queue_size = b.qd + 1 > 4096 ? 4096 : b.qd + 1;
	if (!queues_set)
		s.opts.nr_io_queues = b.nr_reactors;
	if (s.opts.nr_io_queues < b.nr_reactors) {
		fprintf(stderr, "nvmf-gateway bench: %u reactors need %u queues at least\n",
			b.nr_reactors, b.nr_reactors);
		return 1;
	}
	b.s = &s;
	s.priv = &b;
	s.on_signal = bench_signal;
	/* Before the connect, so that the queues are made on them. */
	if (b.nr_reactors > 1 && session_extras_start(&s, &extras, b.nr_reactors - 1, "bench") < 0)
		return 1;
	rc = session_run(&s, bench_job);
	session_extras_free(&extras);
	for (unsigned i = 0; i < b.nslots; i++)
		free(b.slots[i].iov.iov_base);
	free(b.workers);
	free(b.slots);
	free(b.busy);
	free(b.gens);
	return rc;
}
