/* The per-request stage times of a connection (nbd/internal.h). */
#include <inttypes.h>
#include <stdio.h>

#include "gateway/base/log.h"
#include "nbd/internal.h"

static const char *const stage_name[NBD_STAGES] = {
	[NBD_STAGE_RECEIVE] = "receive",
	[NBD_STAGE_VOLUME] = "volume",
	[NBD_STAGE_QUEUED] = "queued",
	[NBD_STAGE_SEND] = "send",
};

void nbd_stage_add(struct nbd_stage_sum *sum, const uint64_t t[NBD_STAGES], uint64_t now)
{
	if (!t[0])
		return; /* never stamped: not a request of the transmission */
	for (unsigned s = 0; s < NBD_STAGES; s++) {
		uint64_t end = now;
		/* The next stage that happened ends this one. */
		for (unsigned k = s + 1; k < NBD_STAGES; k++) {
			if (t[k]) {
				end = t[k];
				break;
			}
		}
		uint64_t d = 0;
		if (t[s] && end > t[s])
			d = end - t[s];
		sum->ns[s] += d;
		if (d > sum->max_ns[s])
			sum->max_ns[s] = d;
	}
	sum->n++;
}

void nbd_stage_log(const struct nbd_conn *c)
{
	static const char *const kind[2] = { "reads", "writes" };

	if (!log_enabled(LOG_LVL_DEBUG))
		return;
	for (unsigned k = 0; k < 2; k++) {
		const struct nbd_stage_sum *m = &c->stages[k];
		char line[256];
		int len = 0;

		if (!m->n)
			continue;
		/* Stops at the end of line: a cut line, never a write past it. */
		for (unsigned s = 0; s < NBD_STAGES && (size_t)len < sizeof(line); s++)
			len += snprintf(line + len, sizeof(line) - (size_t)len,
					"%s%s %.1f (max %.1f)", s ? ", " : "", stage_name[s],
					(double)m->ns[s] / (double)m->n / 1e3,
					(double)m->max_ns[s] / 1e3);
		log_debug("nbd %s: %" PRIu64 " %s, us per request in the gateway: %s", c->peer,
			  m->n, kind[k], line);
	}
}
