/* nvmf-gateway discover: the discovery log page, printed as nvme-cli does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/log.h"
#include "gateway/session.h"
#include "gateway/tools.h"
#include "transports/status.h"

struct disc {
	uint8_t *buf;
	uint32_t len, off; /* bytes wanted, bytes read */
	uint64_t genctr;
	unsigned tries;
};

static void read_chunk(struct session *s);

static void print_log(struct session *s, const uint8_t *buf)
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

	if (s->json)
		printf("{\n  \"genctr\": %llu,\n  \"records\": [",
		       (unsigned long long)h->genctr);
	else
		printf("\nDiscovery Log Number of Records %llu, Generation counter %llu\n",
		       (unsigned long long)h->numrec, (unsigned long long)h->genctr);
	for (uint64_t i = 0; i < h->numrec; i++) {
		const struct nvmf_disc_log_entry *e =
			(const void *)(buf + sizeof(*h) + i * sizeof(*e));
		const char *tr = e->trtype < 4 && trtypes[e->trtype] ? trtypes[e->trtype] : "unknown";
		const char *af = e->adrfam < 5 && adrfams[e->adrfam] ? adrfams[e->adrfam] : "unknown";
		const char *st = e->subtype < 4 && subtypes[e->subtype] ? subtypes[e->subtype] :
									  "unknown";
		char treq[96];
		snprintf(treq, sizeof(treq), "%s%s", treqs[e->treq & 3],
			 (e->treq & 4) ? ", sq flow control disable supported" : "");
		if (s->json) {
			printf("%s\n    {\"trtype\": \"%s\", \"adrfam\": \"%s\", \"subtype\": \"%s\", "
			       "\"treq\": \"%s\", \"portid\": %u, \"trsvcid\": \"%.32s\", "
			       "\"subnqn\": \"%.256s\", \"traddr\": \"%.256s\"}",
			       i ? "," : "", tr, af, st, treq, e->portid, e->trsvcid, e->subnqn,
			       e->traddr);
			continue;
		}
		printf("=====Discovery Log Entry %llu======\n", (unsigned long long)i);
		printf("trtype:  %s\nadrfam:  %s\nsubtype: %s\ntreq:    %s\nportid:  %u\n"
		       "trsvcid: %.32s\nsubnqn:  %.256s\ntraddr:  %.256s\n",
		       tr, af, st, treq, e->portid, e->trsvcid, e->subnqn, e->traddr);
	}
	if (s->json)
		printf("\n  ]\n}\n");
}

static void chunk_done(struct nvmf_req *req, int err)
{
	struct session *s = req->ctx2;
	struct disc *d = s->priv;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	uint32_t n = req->data_len;
	char sbuf[96];

	nvmf_req_put(req);
	if (err || st) {
		log_err("discovery log page: %s",
			err ? strerror(-err) : nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		session_finish(s, 1);
		return;
	}
	d->off += n;
	if (d->off == sizeof(struct nvmf_disc_log_hdr) && d->len == d->off) {
		/* Header alone: now we know how much to read. */
		const struct nvmf_disc_log_hdr *h = (const void *)d->buf;
		if (h->numrec > 4096) {
			log_err("discovery log claims %llu records", (unsigned long long)h->numrec);
			session_finish(s, 1);
			return;
		}
		d->genctr = h->genctr;
		d->len = (uint32_t)(sizeof(*h) + h->numrec * sizeof(struct nvmf_disc_log_entry));
		uint8_t *nb = realloc(d->buf, d->len + sizeof(*h));
		if (!nb) {
			session_finish(s, 1);
			return;
		}
		d->buf = nb;
	}
	if (d->off < d->len) {
		read_chunk(s);
		return;
	}
	if (d->off == d->len + sizeof(struct nvmf_disc_log_hdr)) {
		/* The header read again after the entries: an unchanged
		 * generation counter means the entries are one consistent set. */
		const struct nvmf_disc_log_hdr *h2 = (const void *)(d->buf + d->len);
		if (h2->genctr != d->genctr && ++d->tries < 10) {
			d->off = 0;
			d->len = sizeof(struct nvmf_disc_log_hdr);
			read_chunk(s);
			return;
		}
		print_log(s, d->buf);
		session_finish(s, 0);
		return;
	}
	read_chunk(s);
}

static void read_chunk(struct session *s)
{
	struct disc *d = s->priv;
	struct nvmf_req *req = nvmf_admin_req(&s->ctrl);
	bool recheck = d->off >= d->len;
	uint32_t off = recheck ? 0 : d->off;
	uint32_t n = recheck ? sizeof(struct nvmf_disc_log_hdr) : d->len - d->off;

	if (n > 4096)
		n = 4096;
	req->ctx2 = s;
	req->done = chunk_done;
	req->sqe.opcode = NVME_ADMIN_GET_LOG_PAGE;
	uint32_t numd = n / 4 - 1;
	req->sqe.cdw10 = NVME_LOG_DISCOVERY | ((numd & 0xffff) << 16);
	req->sqe.cdw11 = numd >> 16;
	req->sqe.cdw12 = off;
	req->sqe.cdw13 = 0;
	struct iovec iov = { d->buf + d->off, n };
	nvmf_req_set_data(req, &iov, 1, n, false);
	nvmf_req_submit(req);
}

static void discover_job(struct session *s)
{
	struct disc *d = s->priv;
	d->off = 0;
	d->len = sizeof(struct nvmf_disc_log_hdr);
	read_chunk(s);
}

int cmd_discover(int argc, char **argv)
{
	static const struct option longopts[] = { SESSION_LONGOPTS, { "help", no_argument, 0, 'h' },
						  { 0, 0, 0, 0 } };
	struct session s;
	struct disc d = { 0 };
	int opt, rc;
	bool port_set = false;

	session_defaults(&s, "8009");
	snprintf(s.opts.subnqn, sizeof(s.opts.subnqn), "%s", NVME_DISC_SUBSYS_NQN);
	while ((opt = getopt_long(argc, argv, SESSION_SHORTOPTS SESSION_PATH_SHORTOPTS "vh", longopts,
				  NULL)) != -1) {
		if (opt == 'h') {
			printf("usage: nvmf-gateway discover -t tcp -a ADDR [-s PORT] [-q HOSTNQN] "
			       "[-o json]\n\nReads the discovery log page (port 8009 by default for tcp, "
			       "4420 for rdma; 4420 works with the Linux target).\n\n" SESSION_HELP);
			return 0;
		}
		int r = session_parse_opt(&s, opt, optarg);
		if (r <= 0)
			return 1;
		port_set |= opt == 's';
	}
	/* As nvme-cli: RDMA discovery controllers listen on 4420. */
	if (!port_set && s.opts.path.trtype == NVMF_TR_RDMA)
		snprintf(s.opts.path.trsvcid, sizeof(s.opts.path.trsvcid), "4420");
	s.opts.discovery = true;
	s.opts.kato_ms = 0; /* a one-shot discovery keeps no association alive */
	s.opts.nr_io_queues = 0;
	snprintf(s.opts.name, sizeof(s.opts.name), "discovery");
	d.buf = malloc(2 * sizeof(struct nvmf_disc_log_hdr));
	s.priv = &d;
	rc = session_run(&s, discover_job);
	free(d.buf);
	return rc;
}
