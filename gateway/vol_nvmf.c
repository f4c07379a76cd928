/* The "nvmf" volume: a namespace of a live controller.  Every reactor
 * submits to an I/O queue it owns, so the data path takes no lock; a
 * reactor without a queue of its own (the controller granted fewer queues
 * than there are reactors) hands the I/O to one that has, and gets the
 * completion back by message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/log.h"
#include "gateway/volume.h"
#include "transports/ctrl.h"
#include "transports/io.h"

struct rq {
	struct nvmf_queue **qs; /* the queues this reactor owns */
	unsigned n, next;
};

struct vol_nvmf {
	struct volume v;
	struct nvmf_ctrl *ctrl;
	const struct nvmf_ns *ns;
	unsigned nr_reactors;
	struct rq *per_reactor;
	struct nvmf_queue **all_qs;
};

/* The part of vol_io.priv this backend uses. */
struct nvmf_priv {
	struct nvmf_io nio;
	struct nvmf_queue *q;
};
_Static_assert(sizeof(struct nvmf_priv) <= VOL_IO_PRIV_SIZE, "VOL_IO_PRIV_SIZE too small");

static struct nvmf_priv *priv_of(struct vol_io *io) { return (struct nvmf_priv *)io->priv; }

static void nio_done(struct nvmf_io *nio, int err)
{
	struct vol_io *io = nio->ctx;
	vol_complete(priv_of(io)->q->r, io, err);
}

static void start_on_queue(struct vol_nvmf *n, struct vol_io *io)
{
	struct nvmf_priv *p = priv_of(io);
	struct nvmf_io *nio = &p->nio;
	static const enum nvmf_io_op ops[] = {
		[VOL_READ] = NVMF_IO_READ,
		[VOL_WRITE] = NVMF_IO_WRITE,
		[VOL_FLUSH] = NVMF_IO_FLUSH,
		[VOL_WRITE_ZEROES] = NVMF_IO_WRITE_ZEROES,
		[VOL_TRIM] = NVMF_IO_DISCARD,
	};
	int ret;

	memset(nio, 0, sizeof(*nio));
	nio->op = ops[io->op];
	nio->flags = ((io->flags & VOL_IO_FUA) ? NVMF_IO_FUA : 0) |
		     ((io->flags & VOL_IO_NO_HOLE) ? NVMF_IO_NO_DEALLOC : 0);
	nio->offset = io->offset;
	nio->len = io->length;
	nio->iov = io->iov;
	nio->iovcnt = io->iovcnt;
	nio->cb = nio_done;
	nio->ctx = io;
	ret = nvmf_io_submit(p->q, n->ns, n->ctrl->max_xfer, nio);
	if (ret < 0)
		vol_complete(p->q->r, io, ret);
}

static void forwarded(struct reactor_msg *m)
{
	struct vol_io *io = container_of(m, struct vol_io, msg);
	start_on_queue(io->vol->priv, io);
}

static void nvmf_submit(struct volume *v, struct vol_io *io)
{
	struct vol_nvmf *n = v->priv;
	unsigned id = io->origin->id;
	struct rq *rq = id < n->nr_reactors ? &n->per_reactor[id] : NULL;

	if (rq && rq->n) {
		priv_of(io)->q = rq->qs[rq->next++ % rq->n];
		start_on_queue(n, io);
		return;
	}
	/* No queue here: the queue with the same index modulo the count, so
	 * that forwarding spreads over the queues. */
	struct nvmf_queue *q = n->all_qs[id % n->ctrl->nr_ioq];
	priv_of(io)->q = q;
	vol_forward(q->r, io, forwarded);
}

static void nvmf_destroy(struct volume *v)
{
	struct vol_nvmf *n = v->priv;
	for (unsigned i = 0; i < n->nr_reactors; i++)
		free(n->per_reactor[i].qs);
	free(n->per_reactor);
	free(n->all_qs);
	free(v->stats);
	free(n);
}

static const struct vol_ops nvmf_vol_ops = {
	.name = "nvmf",
	.submit = nvmf_submit,
	.destroy = nvmf_destroy,
};

int vol_nvmf_create(const char *name, struct nvmf_ctrl *ctrl, uint32_t nsid,
		    bool read_only, unsigned nr_reactors, struct volume **out)
{
	const struct nvmf_ns *ns = nvmf_ctrl_find_ns(ctrl, nsid);
	struct vol_nvmf *n;
	char caps[128];

	if (!ns) {
		log_err("%s: controller %s has no active namespace %u", name, ctrl->opts.name,
			nsid);
		return -ENOENT;
	}
	if (!ctrl->nr_ioq) {
		log_err("%s: controller %s has no I/O queue", name, ctrl->opts.name);
		return -ENODEV;
	}
	if (!nr_reactors)
		nr_reactors = 1;
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->ctrl = ctrl;
	n->ns = ns;
	n->nr_reactors = nr_reactors;
	n->per_reactor = calloc(nr_reactors, sizeof(*n->per_reactor));
	n->all_qs = calloc(ctrl->nr_ioq, sizeof(*n->all_qs));
	n->v.stats = calloc(nr_reactors, sizeof(*n->v.stats));
	if (!n->per_reactor || !n->all_qs || !n->v.stats)
		goto nomem;
	for (unsigned i = 0; i < ctrl->nr_ioq; i++) {
		struct nvmf_queue *q = &ctrl->ioq[i];
		n->all_qs[i] = q;
		if (q->r->id >= nr_reactors)
			continue;
		struct rq *rq = &n->per_reactor[q->r->id];
		struct nvmf_queue **qs = realloc(rq->qs, (rq->n + 1) * sizeof(*qs));
		if (!qs)
			goto nomem;
		qs[rq->n++] = q;
		rq->qs = qs;
	}
	n->v.nr_stats = nr_reactors;
	snprintf(n->v.name, sizeof(n->v.name), "%s", name);
	n->v.ops = &nvmf_vol_ops;
	n->v.priv = n;
	n->v.size = ns->nsze << ns->lba_shift;
	n->v.block_size = ns->lba_size;
	n->v.pref_io = ns->optimal_io > ns->lba_size ? ns->optimal_io : ns->lba_size;
	if (n->v.pref_io < 4096 && 4096 % ns->lba_size == 0)
		n->v.pref_io = 4096;
	/* Exporters may send up to 32 MiB; the I/O layer splits it at the
	 * controller's transfer limit. */
	n->v.max_io = 32u << 20;
	n->v.caps = VOL_CAP_FUA;
	if (read_only)
		n->v.caps |= VOL_CAP_READ_ONLY;
	if (ctrl->id->vwc & 1)
		n->v.caps |= VOL_CAP_FLUSH;
	if (ctrl->id->oncs & NVME_CTRL_ONCS_DSM)
		n->v.caps |= VOL_CAP_TRIM;
	if (ctrl->id->oncs & NVME_CTRL_ONCS_WRITE_ZEROES) {
		n->v.caps |= VOL_CAP_WRITE_ZEROES;
		/* DLFEAT: bit 3 = Write Zeroes may deallocate, bits 2:0 = 1 =
		 * deallocated blocks read as zeroes. */
		if ((ns->dlfeat & 0x8) && (ns->dlfeat & 0x7) == 1)
			n->v.caps |= VOL_CAP_FAST_ZERO;
	}
	log_info("%s: namespace %u of %s: %llu bytes, %u-byte blocks, %s", name, nsid,
		 ctrl->opts.name, (unsigned long long)n->v.size, n->v.block_size,
		 vol_caps_str(n->v.caps, caps, sizeof(caps)));
	*out = &n->v;
	return 0;
nomem:
	nvmf_destroy(&n->v);
	return -ENOMEM;
}
