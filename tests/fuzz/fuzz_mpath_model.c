/* A model of the multipath liveness rules (gateway/volume/mpath_*.c), driven by the input:
 * fake paths and I/O, the real status table (nvme_status_disposition)
 * deciding what each answer means, ANA states, path loss and return,
 * time passing.  The model follows the rules mpath.h and the README
 * state: a usable path is attached, not put aside and optimized or
 * non-optimized; a path-related or ANA status puts the path aside for
 * 1 s; RETRY is bounded by max_retries; an I/O with no usable path waits,
 * is looked at again every second and on every state change, and fails
 * with EIO once it has waited the limit (ANATT in transition).  Checked:
 * no I/O completes twice, and once the target answers everything and all
 * timers have fired, every I/O has completed.  It checks the rules, not
 * mpath_*.c itself (which needs reactors and queues): a rule that can
 * leave an I/O waiting for ever is found here. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transports/nvme_spec.h"
#include "transports/status.h"

#define NP 4
#define NIO 32
#define BACKOFF 1000 /* ms */

enum io_state { IO_FREE, IO_FLIGHT, IO_PARKED, IO_DELAYED, IO_DONE };

static struct {
	uint64_t now, lim, anatt;
	unsigned np, max_retries;
	struct {
		int attached;
		uint8_t ana;
		uint64_t aside_until;
	} p[NP];
	struct {
		enum io_state st;
		unsigned path, retries, completions;
		uint64_t wait_start, due;
		int transition;
	} io[NIO];
} M;

static int usable(unsigned i)
{
	return M.p[i].attached && M.p[i].aside_until <= M.now &&
	       (M.p[i].ana == NVME_ANA_OPTIMIZED || M.p[i].ana == NVME_ANA_NON_OPTIMIZED);
}

static int in_change(void)
{
	for (unsigned i = 0; i < M.np; i++)
		if (M.p[i].attached && M.p[i].ana == NVME_ANA_CHANGE)
			return 1;
	return 0;
}

static void complete(unsigned k)
{
	if (M.io[k].completions++)
		abort(); /* completed twice */
	M.io[k].st = IO_DONE;
}

static void start(unsigned k)
{
	for (unsigned i = 0; i < M.np; i++)
		if (usable(i)) {
			M.io[k].st = IO_FLIGHT;
			M.io[k].path = i;
			return;
		}
	if (!M.io[k].wait_start)
		M.io[k].wait_start = M.now ? M.now : 1;
	uint64_t lim = M.lim;
	if ((M.io[k].transition || in_change()) && M.anatt > lim)
		lim = M.anatt;
	if (M.now - M.io[k].wait_start >= lim) {
		complete(k); /* EIO at the deadline */
		return;
	}
	M.io[k].st = IO_PARKED;
}

static void kick(void)
{
	for (unsigned k = 0; k < NIO; k++)
		if (M.io[k].st == IO_PARKED)
			start(k);
}

static void answer(unsigned k, uint16_t status)
{
	unsigned path = M.io[k].path;

	switch (nvme_status_disposition(status)) {
	case NVME_DISP_DONE:
	case NVME_DISP_FAIL:
		complete(k);
		return;
	case NVME_DISP_RETRY:
		if (M.io[k].retries >= M.max_retries) {
			complete(k);
			return;
		}
		M.io[k].retries++;
		M.io[k].st = IO_DELAYED;
		M.io[k].due = M.now + (uint64_t)NVME_STATUS_CRD(status) * 100;
		return;
	case NVME_DISP_ANA:
		if (NVME_STATUS_SC(status) == 0x03)
			M.io[k].transition = 1;
		/* fall through */
	case NVME_DISP_FAILOVER:
	case NVME_DISP_RESET:
		M.p[path].aside_until = M.now + BACKOFF;
		M.io[k].st = IO_PARKED;
		start(k);
		return;
	}
	abort(); /* a disposition the data path does not handle */
}

/* Time passes in steps no longer than the 1 s wait timer. */
static void advance(uint64_t ms)
{
	while (ms) {
		uint64_t step = ms < BACKOFF ? ms : BACKOFF;
		M.now += step;
		ms -= step;
		for (unsigned k = 0; k < NIO; k++)
			if (M.io[k].st == IO_DELAYED && M.io[k].due <= M.now)
				start(k);
		kick();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	size_t pos = 0;
#define NEXT() (pos < n ? d[pos++] : 0)

	memset(&M, 0, sizeof(M));
	M.np = 1 + NEXT() % NP;
	M.lim = (uint64_t)(NEXT() % 16) * 1000;
	M.anatt = (uint64_t)(1 + NEXT() % 20) * 1000;
	M.max_retries = NEXT() % 6;
	for (unsigned i = 0; i < M.np; i++)
		M.p[i].attached = 1;
	while (pos < n) {
		uint8_t op = NEXT(), a = NEXT(), b = NEXT(), c = NEXT();
		unsigned k = a % NIO, i = a % M.np;
		switch (op % 6) {
		case 0: /* a new I/O */
			if (M.io[k].st == IO_FREE || M.io[k].st == IO_DONE) {
				memset(&M.io[k], 0, sizeof(M.io[k]));
				start(k);
			}
			break;
		case 1: /* the target answers an I/O in flight */
			if (M.io[k].st == IO_FLIGHT)
				answer(k, (uint16_t)(b | c << 8) & 0x7fff);
			break;
		case 2: { /* an ANA state change: a new snapshot */
			static const uint8_t st[] = { NVME_ANA_OPTIMIZED, NVME_ANA_NON_OPTIMIZED,
						      NVME_ANA_INACCESSIBLE, NVME_ANA_PERSISTENT_LOSS,
						      NVME_ANA_CHANGE };
			M.p[i].ana = st[b % 5];
			for (unsigned j = 0; j < M.np; j++)
				M.p[j].aside_until = 0;
			kick();
			break;
		}
		case 3: /* the path is lost: its commands come back and wait */
			M.p[i].attached = 0;
			for (unsigned j = 0; j < NIO; j++)
				if (M.io[j].st == IO_FLIGHT && M.io[j].path == i)
					start(j);
			break;
		case 4: /* the path is back */
			M.p[i].attached = 1;
			kick();
			break;
		case 5:
			advance((uint64_t)b * 50);
			break;
		}
	}
	/* The target answers everything from now on; time runs out. */
	for (unsigned round = 0; round < 4; round++) {
		for (unsigned k = 0; k < NIO; k++)
			if (M.io[k].st == IO_FLIGHT)
				complete(k);
		advance(M.anatt + M.lim + 2 * BACKOFF);
	}
	for (unsigned k = 0; k < NIO; k++)
		if (M.io[k].st != IO_FREE && (M.io[k].st != IO_DONE || M.io[k].completions != 1))
			abort(); /* left waiting, or not completed once */
	return 0;
}
