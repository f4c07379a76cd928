/* libFuzzer harness for the NVMe/TCP receive path: arbitrary bytes from a
 * "controller" into tcp_rx_consume() on a live queue with requests in
 * flight.  Beyond the sanitizers, it checks the engine's contract: the
 * stream is either consumed whole or the connection is failed, and every
 * request completes exactly once.
 *
 * Input: a 22-byte header, then the byte stream.
 *   [0]      bit 0 header digest, bit 1 data digest; bits 4-7: feed the
 *            stream in pieces of 1 << (n - 1) bytes (0: all at once)
 *   [1]      number of requests (1..4, taken modulo)
 *   [2..21]  per request: 1 byte write (bit 0), 4 bytes LE data length
 *            (capped at 256 KiB; 0 = no data)
 * Request k gets CID k | (k + 1) << 12 (a fresh pool hands them out in
 * that order), which tests/fuzz/pcap2corpus.py relies on. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/log.h"
#include "tests/unit/tcp_fixture.h"

#define NREQ 4
#define MAX_LEN (256u * 1024)
#define HDR_LEN (2 + NREQ * 5)

static struct reactor reactor;
static struct tcp_fixture fx;
static uint8_t bufs[NREQ][MAX_LEN];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* Every rejected input logs its reason: below ERR, unless asked. */
	if (!getenv("FUZZ_VERBOSE"))
		log_set_level((enum log_level)(LOG_LVL_ERR - 1));
	if (reactor_init(&reactor, 0, 64) < 0)
		abort();
	return 0;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nvmf_req *reqs[NREQ];
	unsigned nreq, slots[NREQ];

	if (size < HDR_LEN)
		return -1;
	if (tcpfx_init(&fx, &reactor, 16, data[0] & 1, data[0] & 2) < 0)
		abort();
	nreq = data[1] % NREQ + 1;
	for (unsigned k = 0; k < nreq; k++) {
		const uint8_t *d = data + 2 + k * 5;
		uint32_t len = le32(d + 1);
		if (len > MAX_LEN)
			len %= MAX_LEN + 1;
		reqs[k] = tcpfx_submit(&fx, d[0] & 1, bufs[k], len);
		if (!reqs[k])
			abort();
		slots[k] = tcpfx_slot(reqs[k]);
	}

	const uint8_t *s = data + HDR_LEN;
	size_t left = size - HDR_LEN;
	unsigned shift = data[0] >> 4;
	size_t piece = shift ? (size_t)1 << (shift - 1) : left;
	while (left && fx.q.state == NVMF_Q_LIVE) {
		uint32_t n = (uint32_t)(left < piece ? left : piece);
		int ret = tcp_rx_consume(fx.tq, s, n);
		if (ret < 0) {
			/* A rejection always takes the connection down. */
			if (fx.q.state != NVMF_Q_DRAINING || fx.tq->conn != TCP_CONN_CLOSING) {
				fprintf(stderr, "rx error %d without a teardown\n", ret);
				abort();
			}
			break;
		}
		if ((uint32_t)ret != n) {
			fprintf(stderr, "consumed %d of %u bytes on a live queue\n", ret, n);
			abort();
		}
		s += n;
		left -= n;
		/* As between two receives: sends reaped, deferred work run. */
		tcpfx_settle(&fx);
	}
	tcpfx_fini(&fx);
	for (unsigned k = 0; k < nreq; k++) {
		if (fx.done_count[slots[k]] != 1) {
			fprintf(stderr, "request %u completed %u times\n", k, fx.done_count[slots[k]]);
			abort();
		}
	}
	return 0;
}
