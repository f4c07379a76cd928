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

struct slot {
	struct nvmf_io io;
	struct iovec iov;
	struct bench *b;
	uint64_t unit;
	uint32_t gen;
	uint64_t start_ns;
	bool busy;
};

struct bench {
	struct session *s;
	enum workload wl;
	uint32_t bs;
	unsigned qd;
	unsigned seconds;
	bool verify;
	uint32_t seed;
	uint64_t size; /* region in bytes */
	uint64_t units;
	uint64_t seq_next;
	uint64_t rng;
	enum phase phase;
	uint64_t phase_end_ns;
	uint64_t start_ns;
	struct nvmf_ns *ns;
	struct slot *slots;
	unsigned nslots; /* not qd x nr_ioq: a lost connection zeroes nr_ioq */
	unsigned active;
	uint32_t *gens; /* per unit, 0 = never written */
	uint8_t *busy; /* per unit: an I/O in flight */
	uint64_t ios, bytes, errors, mismatches, checked;
	/* The I/O queues' time with the target and commands completed, at
	 * the run's start, then over the run (nvmf_queue.target_ns). */
	uint64_t target_ns, cmds;
	struct hist lat;
	uint64_t elapsed_ns;
	bool stop;
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

static void verify_unit(struct bench *b, struct slot *sl)
{
	uint32_t lbas = b->ns->lba_size;
	uint8_t *want = malloc(lbas);
	uint64_t first = sl->unit * b->bs / lbas;

	for (uint32_t i = 0; i < b->bs / lbas; i++) {
		uint8_t *got = (uint8_t *)sl->iov.iov_base + (size_t)i * lbas;
		pattern_fill(want, lbas, first + i, sl->gen, b->seed);
		b->checked++;
		if (memcmp(want, got, lbas) == 0)
			continue;
		struct pat_hdr h;
		memcpy(&h, got, sizeof(h));
		if (b->mismatches++ < 10)
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

static bool want_read(struct bench *b)
{
	switch (b->wl) {
	case W_READ:
	case W_RANDREAD:
		return true;
	case W_RANDRW:
		return rng_next(&b->rng) & 1;
	default:
		return false;
	}
}

static void slot_start(struct slot *sl);
static void phase_next(struct bench *b);

static void slot_done(struct nvmf_io *io, int err)
{
	struct slot *sl = io->ctx;
	struct bench *b = sl->b;
	uint64_t now = reactor_now_ns();

	b->busy[sl->unit] = 0;
	sl->busy = false;
	b->active--;
	if (err) {
		if (b->errors++ < 10)
			fprintf(stderr, "bench: %s at byte %llu failed: %s\n",
				io->op == NVMF_IO_READ ? "read" : "write",
				(unsigned long long)io->offset, strerror(-err));
		b->stop = true;
	} else if (io->op == NVMF_IO_WRITE) {
		if (b->gens)
			b->gens[sl->unit] = sl->gen;
	} else if (b->verify && sl->gen) {
		verify_unit(b, sl);
	}
	if (b->phase == PH_RUN && !err) {
		b->ios++;
		b->bytes += b->bs;
		hist_record(&b->lat, now - sl->start_ns);
	}
	if (b->phase == PH_RUN && now >= b->phase_end_ns)
		b->stop = true;
	if (!b->stop && (b->phase == PH_RUN || b->seq_next < b->units)) {
		slot_start(sl);
		return;
	}
	if (b->active == 0)
		phase_next(b);
}

/* Picks the next unit and direction for this phase; false when the phase
 * has nothing left for this slot. */
static bool pick(struct bench *b, struct slot *sl, bool *is_read)
{
	bool rnd = b->wl >= W_RANDREAD;

	if (b->phase != PH_RUN) {
		while (b->seq_next < b->units && b->phase == PH_CHECK && !b->gens[b->seq_next])
			b->seq_next++;
		if (b->seq_next >= b->units)
			return false;
		sl->unit = b->seq_next++;
		*is_read = b->phase == PH_CHECK;
		return true;
	}
	*is_read = want_read(b);
	for (unsigned tries = 0; tries < 64; tries++) {
		uint64_t u = rnd ? rng_next(&b->rng) % b->units : b->seq_next++ % b->units;
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
	struct bench *b = sl->b;
	bool is_read;

	if (!pick(b, sl, &is_read)) {
		if (b->active == 0)
			phase_next(b);
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
	b->active++;
	struct nvmf_queue *q = &b->s->ctrl.ioq[(sl - b->slots) % b->s->ctrl.nr_ioq];
	int ret = nvmf_io_submit(q, b->ns, b->s->ctrl.max_xfer, &sl->io);
	if (ret < 0)
		slot_done(&sl->io, ret);
}

/* Sums over the I/O queues: their time with the target, and commands. */
static void queue_sums(const struct bench *b, uint64_t *target_ns, uint64_t *cmds)
{
	*target_ns = *cmds = 0;
	for (unsigned i = 0; i < b->s->ctrl.nr_ioq; i++) {
		*target_ns += b->s->ctrl.ioq[i].target_ns;
		*cmds += b->s->ctrl.ioq[i].nr_completed;
	}
}

/* Ends the run's sums (phase_start took their start). */
static void run_sums_end(struct bench *b)
{
	uint64_t t, c;
	queue_sums(b, &t, &c);
	b->target_ns = t - b->target_ns;
	b->cmds = c - b->cmds;
}

static void report(struct bench *b)
{
	double secs = (double)b->elapsed_ns / 1e9;
	double iops = secs > 0 ? (double)b->ios / secs : 0;
	double mibs = secs > 0 ? (double)b->bytes / secs / (1024.0 * 1024) : 0;
	/* Per I/O: the time its commands were with the target (where the
	 * transport measures it, else 0), and how many commands it took. */
	double tgt_us = b->ios ? (double)b->target_ns / (double)b->ios / 1e3 : 0;
	double cmds = b->ios ? (double)b->cmds / (double)b->ios : 0;
	struct session *s = b->s;

	if (s->json) {
		printf("{\"transport\": \"%s\", \"traddr\": \"%s\", \"trsvcid\": \"%s\", "
		       "\"subnqn\": \"%s\", \"nsid\": %u, \"workload\": \"%s\", \"bs\": %u, "
		       "\"qd\": %u, \"queues\": %u, \"seconds\": %.3f, \"ios\": %llu, "
		       "\"iops\": %.1f, \"mibps\": %.2f, \"lat_us\": {\"mean\": %.1f, "
		       "\"p50\": %.1f, \"p99\": %.1f, \"p99.9\": %.1f, \"max\": %.1f}, "
		       "\"target_us\": %.1f, \"cmds_per_io\": %.2f, "
		       "\"errors\": %llu, \"verify\": %s, \"checked\": %llu, \"mismatches\": %llu}\n",
		       nvmf_trtype_name(s->opts.path.trtype), s->opts.path.traddr,
		       s->opts.path.trsvcid, s->opts.subnqn, s->nsid, wl_names[b->wl], b->bs, b->qd,
		       s->ctrl.nr_ioq, secs, (unsigned long long)b->ios, iops, mibs,
		       hist_mean(&b->lat) / 1e3, (double)hist_percentile(&b->lat, 50) / 1e3,
		       (double)hist_percentile(&b->lat, 99) / 1e3,
		       (double)hist_percentile(&b->lat, 99.9) / 1e3,
		       (double)hist_max(&b->lat) / 1e3, tgt_us, cmds, (unsigned long long)b->errors,
		       b->verify ? "true" : "false", (unsigned long long)b->checked,
		       (unsigned long long)b->mismatches);
		return;
	}
	printf("bench: %s %s:%s %s nsid %u: %s bs %u qd %u x %u queue(s), %.1f s\n",
	       nvmf_trtype_name(s->opts.path.trtype), s->opts.path.traddr, s->opts.path.trsvcid,
	       s->opts.subnqn, s->nsid, wl_names[b->wl], b->bs, b->qd, s->ctrl.nr_ioq, secs);
	printf("  IOPS %.0f  MiB/s %.2f  lat(us) avg %.1f p50 %.1f p99 %.1f p99.9 %.1f max %.1f\n",
	       iops, mibs, hist_mean(&b->lat) / 1e3, (double)hist_percentile(&b->lat, 50) / 1e3,
	       (double)hist_percentile(&b->lat, 99) / 1e3,
	       (double)hist_percentile(&b->lat, 99.9) / 1e3, (double)hist_max(&b->lat) / 1e3);
	if (b->target_ns)
		printf("  with the target: %.1f us per I/O (%.2f commands each)\n", tgt_us, cmds);
	if (b->verify)
		printf("  verify: %llu blocks checked, %llu mismatches%s\n",
		       (unsigned long long)b->checked, (unsigned long long)b->mismatches,
		       b->mismatches ? "  FAILED" : "");
	if (b->errors)
		printf("  errors: %llu\n", (unsigned long long)b->errors);
}

static void phase_start(struct bench *b, enum phase p)
{
	b->phase = p;
	b->seq_next = 0;
	b->stop = false;
	if (p == PH_RUN) {
		b->start_ns = reactor_now_ns();
		b->phase_end_ns = b->start_ns + (uint64_t)b->seconds * NSEC_PER_SEC;
		queue_sums(b, &b->target_ns, &b->cmds);
	}
	for (unsigned i = 0; i < b->qd * b->s->ctrl.nr_ioq; i++)
		slot_start(&b->slots[i]);
}

static void phase_next(struct bench *b)
{
	if (b->errors) {
		if (b->phase == PH_RUN) {
			b->elapsed_ns = reactor_now_ns() - b->start_ns;
			run_sums_end(b);
		}
		report(b);
		session_finish(b->s, 1);
		return;
	}
	switch (b->phase) {
	case PH_FILL:
		phase_start(b, PH_RUN);
		return;
	case PH_RUN:
		b->elapsed_ns = reactor_now_ns() - b->start_ns;
		run_sums_end(b);
		if (b->verify) {
			phase_start(b, PH_CHECK);
			return;
		}
		break;
	case PH_CHECK:
		break;
	}
	report(b);
	session_finish(b->s, b->mismatches || b->errors ? 1 : 0);
}

static void bench_signal(struct session *s)
{
	struct bench *b = s->priv;
	b->stop = true;
	b->phase_end_ns = 0;
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
	if (!b->units) {
		log_err("namespace smaller than one block of %u bytes", b->bs);
		session_finish(s, 1);
		return;
	}
	unsigned nslots = b->qd * c->nr_ioq;
	b->slots = calloc(nslots, sizeof(*b->slots));
	b->nslots = b->slots ? nslots : 0;
	b->busy = calloc(b->units, 1);
	if (b->verify)
		b->gens = calloc(b->units, sizeof(*b->gens));
	if (!b->slots || !b->busy || (b->verify && !b->gens)) {
		session_finish(s, 1);
		return;
	}
	for (unsigned i = 0; i < nslots; i++) {
		b->slots[i].b = b;
		b->slots[i].iov.iov_base = aligned_alloc(4096, (b->bs + 4095) / 4096 * 4096);
		if (!b->slots[i].iov.iov_base) {
			session_finish(s, 1);
			return;
		}
		memset(b->slots[i].iov.iov_base, 0, b->bs);
	}
	hist_init(&b->lat);
	/* Reads need known content to verify: write the region first. */
	bool reads = b->wl == W_READ || b->wl == W_RANDREAD || b->wl == W_RANDRW;
	phase_start(b, b->verify && reads ? PH_FILL : PH_RUN);
}

int cmd_bench(int argc, char **argv)
{
	static const struct option longopts[] = {
		SESSION_LONGOPTS,
		{ "workload", required_argument, 0, 'w' },
		{ "block-size", required_argument, 0, 'b' },
		{ "queue-depth", required_argument, 0, 'd' },
		{ "queues", required_argument, 0, 'j' },
		{ "time", required_argument, 0, 'T' },
		{ "verify", no_argument, 0, 2000 },
		{ "seed", required_argument, 0, 2001 },
		{ "size", required_argument, 0, 2002 },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct session s;
	struct bench b = { .wl = W_RANDREAD, .bs = 4096, .qd = 32, .seconds = 10, .seed = 1 };
	int opt, rc;
	uint64_t v;

	session_defaults(&s, "4420");
	while ((opt = getopt_long(argc, argv, SESSION_SHORTOPTS "vhw:b:d:j:T:", longopts, NULL)) !=
	       -1) {
		switch (opt) {
		case 'h':
			printf("usage: nvmf-gateway bench -t tcp -a ADDR [-s PORT] -n NQN [--nsid N]\n"
			       "         [-w read|write|randread|randwrite|randrw] [-b SIZE] [-d QD]\n"
			       "         [-j QUEUES] [-T SECONDS] [--verify [--seed N] [--size SIZE]] "
			       "[-o json]\n\n"
			       "  -w, --workload W        (default randread)\n"
			       "  -b, --block-size SIZE   bytes per I/O, k/m suffixes (default 4k)\n"
			       "  -d, --queue-depth QD    I/Os in flight per queue (default 32)\n"
			       "  -j, --queues N          I/O queues (default 1)\n"
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
			break;
		case 2000:
			b.verify = true;
			break;
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
		}
	}
	/* Every slot needs a request, and a split I/O more than one. */
	if (b.qd > s.opts.queue_size - 1)
		s.opts.queue_size = b.qd + 1 > 4096 ? 4096 : b.qd + 1;
	b.s = &s;
	b.rng = 0x2545f4914f6cdd1dull ^ b.seed;
	s.priv = &b;
	s.on_signal = bench_signal;
	rc = session_run(&s, bench_job);
	for (unsigned i = 0; i < b.nslots; i++)
		free(b.slots[i].iov.iov_base);
	free(b.slots);
	free(b.busy);
	free(b.gens);
	return rc;
}
