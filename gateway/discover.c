/* The discovery log page: its walk (see discover.h) and its printing, as
 * nvme-cli does.  The command that reads it is cmd_discover.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/discover.h"
#include "transports/nvme_spec.h"

/* A fixed-size field of the log (NUL-padded, maybe not terminated) as a
 * JSON string.  The bytes are the target's: quotes, backslashes, control
 * and non-ASCII bytes are escaped, so the output stays valid JSON. */
static void json_field(FILE *f, const char *s, size_t max)
{
	fputc('"', f);
	for (size_t i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

void disc_print(FILE *f, const uint8_t *buf, bool json)
{
	const struct nvmf_disc_log_hdr *h = (const void *)buf;
	static const char *const trtypes[] = { [1] = "rdma", [2] = "fc", [3] = "tcp" };
	static const char *const adrfams[] = { [1] = "ipv4", [2] = "ipv6", [3] = "infiniband",
					       [4] = "fibre-channel" };
	static const char *const subtypes[] = { [1] = "discovery subsystem referral",
						[2] = "nvme subsystem",
						[3] = "current discovery subsystem" };
	static const char *const treqs[] = { "not specified", "required", "not required",
					     "reserved" };
	/* TCP's TSAS security type (NVMe/TCP transport specification). */
	static const char *const sectypes[] = { "none", "tls1.2", "tls1.3" };

	if (json)
		fprintf(f, "{\n  \"genctr\": %llu,\n  \"records\": [",
			(unsigned long long)h->genctr);
	else
		fprintf(f, "\nDiscovery Log Number of Records %llu, Generation counter %llu\n",
			(unsigned long long)h->numrec, (unsigned long long)h->genctr);
	for (uint64_t i = 0; i < h->numrec; i++) {
		const struct nvmf_disc_log_entry *e =
			(const void *)(buf + sizeof(*h) + i * sizeof(*e));
		const char *tr = e->trtype < 4 && trtypes[e->trtype] ? trtypes[e->trtype] : "unknown";
		const char *af = e->adrfam < 5 && adrfams[e->adrfam] ? adrfams[e->adrfam] : "unknown";
		const char *st = e->subtype < 4 && subtypes[e->subtype] ? subtypes[e->subtype] :
									  "unknown";
		const char *sec = e->trtype != 3 ? NULL : e->tsas[0] < 3 ? sectypes[e->tsas[0]]
									   : "unknown";
		char treq[96];
		snprintf(treq, sizeof(treq), "%s%s", treqs[e->treq & 3],
			 (e->treq & 4) ? ", sq flow control disable supported" : "");
		if (json) {
			fprintf(f, "%s\n    {\"trtype\": \"%s\", \"adrfam\": \"%s\", \"subtype\": \"%s\", "
				"\"treq\": \"%s\", \"portid\": %u, \"trsvcid\": ",
				i ? "," : "", tr, af, st, treq, e->portid);
			json_field(f, e->trsvcid, sizeof(e->trsvcid));
			fputs(", \"subnqn\": ", f);
			json_field(f, e->subnqn, sizeof(e->subnqn));
			fputs(", \"traddr\": ", f);
			json_field(f, e->traddr, sizeof(e->traddr));
			if (sec)
				fprintf(f, ", \"sectype\": \"%s\"", sec);
			fputc('}', f);
			continue;
		}
		fprintf(f, "=====Discovery Log Entry %llu======\n", (unsigned long long)i);
		fprintf(f, "trtype:  %s\nadrfam:  %s\nsubtype: %s\ntreq:    %s\nportid:  %u\n"
			"trsvcid: %.32s\nsubnqn:  %.256s\ntraddr:  %.256s\n",
			tr, af, st, treq, e->portid, e->trsvcid, e->subnqn, e->traddr);
		if (sec)
			fprintf(f, "sectype: %s\n", sec);
	}
	if (json)
		fprintf(f, "\n  ]\n}\n");
}

int disc_walk_init(struct disc_walk *d)
{
	memset(d, 0, sizeof(*d));
	d->buf = malloc(2 * sizeof(struct nvmf_disc_log_hdr));
	d->len = sizeof(struct nvmf_disc_log_hdr);
	return d->buf ? 0 : -ENOMEM;
}

void disc_walk_free(struct disc_walk *d)
{
	free(d->buf);
	d->buf = NULL;
}

/* Reads the first header into buf, then the records after it, then the
 * header again into buf + len: off runs from 0 to len + the header. */
void disc_walk_next(struct disc_walk *d, uint32_t *log_off, uint32_t *n, uint8_t **dst)
{
	const uint32_t hdr = sizeof(struct nvmf_disc_log_hdr);

	if (d->off < d->len) {
		*log_off = d->off;
		*n = d->len - d->off;
	} else {
		/* The second header, maybe its rest after a short read. */
		*log_off = d->off - d->len;
		*n = d->len + hdr - d->off;
	}
	if (*n > DISC_CHUNK)
		*n = DISC_CHUNK;
	*dst = d->buf + d->off;
	d->asked = *n;
}

static enum disc_step walk_err(struct disc_walk *d, const char *why)
{
	d->why = why;
	return DISC_ERR;
}

void disc_walk_restart(struct disc_walk *d)
{
	d->off = 0;
	d->len = sizeof(struct nvmf_disc_log_hdr);
	d->have_hdr = false;
}

enum disc_step disc_walk_got(struct disc_walk *d, uint32_t n)
{
	const uint32_t hdr = sizeof(struct nvmf_disc_log_hdr);

	/* Nothing, or not whole dwords, would make the next read's NUMD
	 * wrong or the walk endless. */
	if (!n || n > d->asked || n % 4)
		return walk_err(d, "a read returned no data or not whole dwords");
	d->off += n;
	if (!d->have_hdr && d->off == hdr) {
		/* Header alone: now we know how much to read. */
		const struct nvmf_disc_log_hdr *h = (const void *)d->buf;
		if (h->numrec > DISC_MAX_RECORDS)
			return walk_err(d, "the log claims more records than a target has");
		d->have_hdr = true;
		d->genctr = h->genctr;
		d->len = (uint32_t)(hdr + h->numrec * sizeof(struct nvmf_disc_log_entry));
		uint8_t *nb = realloc(d->buf, d->len + hdr);
		if (!nb)
			return walk_err(d, "out of memory");
		d->buf = nb;
	}
	if (d->off < d->len + hdr || !d->have_hdr)
		return DISC_READ;
	/* The header read again after the records: an unchanged generation
	 * counter means the records are one consistent set. */
	const struct nvmf_disc_log_hdr *h2 = (const void *)(d->buf + d->len);
	if (h2->genctr == d->genctr)
		return DISC_DONE;
	if (++d->tries >= DISC_TRIES)
		return walk_err(d, "the log kept changing while it was read");
	disc_walk_restart(d);
	return DISC_READ;
}
