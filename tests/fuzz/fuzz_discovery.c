/* libFuzzer harness for the discovery log page walk (gateway/discover.c),
 * with the harness as the target.  The input decides the log: how many
 * records each version has (any 64-bit count), their bytes (every field,
 * strings included), when the generation counter moves between two reads,
 * and whether a read returns fewer bytes than asked.  Checked:
 * - every Get Log Page asks for whole dwords (NUMD is n / 4 - 1) and its
 *   bytes land inside the walk's buffer (ASan);
 * - the walk ends, in a bounded number of reads;
 * - a finished walk holds one version of the log: its records are that
 *   version's, and the header read after them has the same counter;
 * - the JSON printout is valid JSON with one object per record, and the
 *   text printout does not crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/discover.h"
#include "gateway/base/json.h"
#include "gateway/base/log.h"
#include "transports/nvme_spec.h"

#include "tests/fuzz/fuzz_check.h"

#define HDR sizeof(struct nvmf_disc_log_hdr)
#define REC sizeof(struct nvmf_disc_log_entry)

struct target {
	uint64_t numrec[2];
	uint64_t genbase;
	unsigned version;
	const uint8_t *src;
	size_t srclen;
};

static uint64_t log_numrec(const struct target *t, unsigned v)
{
	return t->numrec[v & 1];
}

/* Byte at offset o of version v's log. */
static uint8_t log_byte(const struct target *t, unsigned v, uint64_t o)
{
	uint64_t n = log_numrec(t, v);

	if (o < HDR) {
		struct nvmf_disc_log_hdr h = { .genctr = t->genbase + v, .numrec = n };
		return ((const uint8_t *)&h)[o];
	}
	if ((o - HDR) / REC >= n)
		return 0;
	return (uint8_t)(t->src[(o + 37 * v) % t->srclen] + v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct disc_walk d;
	struct target t;
	const uint8_t *sched;
	uint64_t reads = 0;
	unsigned si = 0;
	enum disc_step st = DISC_READ;

	log_set_level(LOG_LVL_ERR);
	if (size < 22)
		return 0;
	uint8_t flags = data[0];
	/* Small counts mostly; the two top bits of each take 8 raw bytes from
	 * the input instead, to reach the limit. */
	t.numrec[0] = data[1] % 8;
	t.numrec[1] = data[2] % 8;
	if ((data[1] & 0xc0) == 0xc0)
		memcpy(&t.numrec[0], data + 4, 8);
	if ((data[2] & 0xc0) == 0xc0)
		memcpy(&t.numrec[1], data + 12, 8);
	/* A count within the limit is walked, a few MiB with short reads: too
	 * slow to fuzz (test_discover walks the limit); over it is refused. */
	for (int i = 0; i < 2; i++)
		if (t.numrec[i] >= 64 && t.numrec[i] <= DISC_MAX_RECORDS)
			t.numrec[i] %= 64;
	t.genbase = data[3];
	t.version = 0;
	sched = data + 4;
	t.src = data + 20;
	t.srclen = size - 20;

	/* A walk reads at least a dword each time, over two headers and the
	 * records; a log over the limit ends at its first header. */
	uint64_t most = 0;
	for (int i = 0; i < 2; i++) {
		uint64_t n = t.numrec[i] > DISC_MAX_RECORDS ? 0 : t.numrec[i];
		if (most < 2 * HDR + n * REC)
			most = 2 * HDR + n * REC;
	}
	most = DISC_TRIES * (most / 4 + 1);
	check(disc_walk_init(&d) == 0);
	while (st == DISC_READ) {
		uint32_t off, n, got;
		uint8_t *dst, s = sched[si++ % 16];

		check(++reads <= most);
		disc_walk_next(&d, &off, &n, &dst);
		check(n >= 4 && n % 4 == 0 && n <= DISC_CHUNK);
		/* The target may change between two reads, a few times. */
		if ((s & 3) == 0 && t.version < 40)
			t.version++;
		got = n;
		if ((flags & 1) && (s & 0x10))
			got = ((n >> (1 + (s >> 5) % 4)) & ~3u) ?: 4; /* a half, a quarter... */
		for (uint32_t k = 0; k < got; k++)
			dst[k] = log_byte(&t, t.version, (uint64_t)off + k);
		st = disc_walk_got(&d, got);
	}
	if (st == DISC_ERR) {
		check(d.why && d.why[0]);
		disc_walk_free(&d);
		return 0;
	}
	const struct nvmf_disc_log_hdr *h = (const void *)d.buf;
	uint64_t v = h->genctr - t.genbase;
	check(v <= t.version);
	check(h->numrec == log_numrec(&t, (unsigned)v));
	const struct nvmf_disc_log_hdr *h2 = (const void *)(d.buf + HDR + h->numrec * REC);
	check(h2->genctr == h->genctr);
	for (uint64_t o = HDR; o < HDR + h->numrec * REC; o++)
		check(d.buf[o] == log_byte(&t, (unsigned)v, o));

	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	check(f);
	disc_print(f, d.buf, true);
	fclose(f);
	struct json_val *j = NULL;
	char err[128];
	if (json_parse(text, len, &j, err, sizeof(err)) < 0) {
		fprintf(stderr, "discover JSON does not parse: %s\n%s\n", err, text);
		abort();
	}
	const struct json_val *recs = json_get(j, "records");
	check(recs && recs->type == JSON_ARR && recs->nr_kids == h->numrec);
	json_val_free(j);
	free(text);
	f = open_memstream(&text, &len);
	check(f);
	disc_print(f, d.buf, false);
	fclose(f);
	free(text);
	disc_walk_free(&d);
	return 0;
}
