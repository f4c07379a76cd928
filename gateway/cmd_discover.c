/* nvmf-gateway discover: the discovery log page, printed as nvme-cli does. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/discover.h"
#include "gateway/base/log.h"
#include "gateway/session.h"
#include "gateway/tools.h"
#include "transports/status.h"

static void read_chunk(struct session *s);

static void chunk_done(struct nvmf_req *req, int err)
{
	struct session *s = req->ctx2;
	struct disc_walk *d = s->priv;
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
	switch (disc_walk_got(d, n)) {
	case DISC_READ:
		read_chunk(s);
		return;
	case DISC_ERR:
		log_err("discovery log page: %s", d->why);
		session_finish(s, 1);
		return;
	case DISC_DONE:
		disc_print(stdout, d->buf, s->json);
		session_finish(s, 0);
		return;
	}
}

static void read_chunk(struct session *s)
{
	struct disc_walk *d = s->priv;
	struct nvmf_req *req = nvmf_admin_req(&s->ctrl);
	uint32_t off, n;
	uint8_t *dst;

	disc_walk_next(d, &off, &n, &dst);
	req->ctx2 = s;
	req->done = chunk_done;
	nvmf_prep_get_log(req, NVME_LOG_DISCOVERY, 0, dst, n, off);
	nvmf_req_submit(req);
}

static void discover_job(struct session *s)
{
	struct disc_walk *d = s->priv;

	disc_walk_restart(d);
	d->tries = 0;
	read_chunk(s);
}

int cmd_discover(int argc, char **argv)
{
	static const struct option longopts[] = { SESSION_LONGOPTS, { "help", no_argument, 0, 'h' },
						  { 0, 0, 0, 0 } };
	struct session s;
	struct disc_walk d;
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
	if (disc_walk_init(&d) < 0) {
		log_err("discover: out of memory");
		return 1;
	}
	s.priv = &d;
	rc = session_run(&s, discover_job);
	disc_walk_free(&d);
	return rc;
}
