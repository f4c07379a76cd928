/* The "mem" volume: a zeroed RAM buffer.  It stands in for a namespace in
 * the exporters' unit tests, fuzzers and benchmarks, where a target would
 * only add noise; it completes every I/O on the submitting reactor after
 * the current batch, as a real backend would. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gateway/base/iov.h"
#include "gateway/volume/volume.h"

struct vol_mem {
	struct volume v;
	uint8_t *data;
};

static void mem_submit(struct volume *v, struct vol_io *io)
{
	struct vol_mem *m = container_of(v, struct vol_mem, v);
	uint8_t *p = m->data + io->offset;

	switch (io->op) {
	case VOL_READ:
		iov_copy_to(io->iov, io->iovcnt, 0, p, io->length);
		break;
	case VOL_WRITE:
		iov_copy_from(io->iov, io->iovcnt, 0, p, io->length);
		break;
	case VOL_WRITE_ZEROES:
	case VOL_TRIM: /* deallocated blocks read as zeroes here */
		memset(p, 0, io->length);
		break;
	case VOL_FLUSH:
		break;
	}
	vol_complete(io->origin, io, 0);
}

static void mem_destroy(struct volume *v)
{
	struct vol_mem *m = container_of(v, struct vol_mem, v);
	munmap(m->data, v->size);
	free(v->stats);
	free(m);
}

static const struct vol_ops mem_ops = {
	.name = "mem",
	.submit = mem_submit,
	.destroy = mem_destroy,
};

int vol_mem_create(const char *name, uint64_t size, uint32_t block_size, uint32_t caps,
		   unsigned nr_reactors, struct volume **out)
{
	struct vol_mem *m;

	if (!size || block_size < 512 || (block_size & (block_size - 1)) ||
	    size % block_size)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	/* mmap: pages appear as they are touched, so a large sparse test
	 * volume costs only what is written. */
	m->data = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
		       MAP_NORESERVE, -1, 0);
	if (m->data == MAP_FAILED) {
		free(m);
		return -ENOMEM;
	}
	m->v.stats = calloc(nr_reactors ? nr_reactors : 1, sizeof(*m->v.stats));
	if (!m->v.stats) {
		munmap(m->data, size);
		free(m);
		return -ENOMEM;
	}
	m->v.nr_stats = nr_reactors ? nr_reactors : 1;
	snprintf(m->v.name, sizeof(m->v.name), "%s", name);
	m->v.ops = &mem_ops;
	m->v.size = size;
	m->v.block_size = block_size;
	m->v.pref_io = block_size > 4096 ? block_size : 4096;
	m->v.max_io = 32u << 20;
	m->v.caps = caps;
	m->v.priv = m;
	*out = &m->v;
	return 0;
}

uint8_t *vol_mem_data(struct volume *v)
{
	return container_of(v, struct vol_mem, v)->data;
}
