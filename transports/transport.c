#include <errno.h>
#include <string.h>

#include "transports/transport.h"

/* transports/rdma.c */
extern const struct nvmf_transport_ops nvmf_rdma_ops;

static const struct {
	const char *name;
	const struct nvmf_transport_ops *ops;
} transports[] = {
	[NVMF_TR_TCP] = { "tcp", &nvmf_tcp_ops },
	[NVMF_TR_RDMA] = { "rdma", &nvmf_rdma_ops },
};

const struct nvmf_transport_ops *nvmf_transport_find(enum nvmf_trtype t)
{
	return (unsigned)t < sizeof(transports) / sizeof(transports[0]) ? transports[t].ops : NULL;
}

const char *nvmf_trtype_name(enum nvmf_trtype t)
{
	return (unsigned)t < sizeof(transports) / sizeof(transports[0]) ? transports[t].name : "?";
}

int nvmf_trtype_parse(const char *s, enum nvmf_trtype *out)
{
	for (unsigned i = 0; i < sizeof(transports) / sizeof(transports[0]); i++) {
		if (strcmp(s, transports[i].name) == 0) {
			*out = (enum nvmf_trtype)i;
			return 0;
		}
	}
	return -EINVAL;
}
