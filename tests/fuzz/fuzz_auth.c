/* libFuzzer harness for the host side of DH-HMAC-CHAP: nvmf_auth_begin()
 * and nvmf_auth_step() with every target message (Challenge, Success1,
 * Failure1, anything else) taken from the input.  Beyond the sanitizers it
 * checks what the state machine promises: a step returns 1 with a message
 * to send or a buffer to fill, 0 only in DONE, -errno only in FAILED; a
 * message the host sends is well formed and carries the transaction id;
 * bidirectional success needs the controller's right response; the
 * transaction ends within a bounded number of steps.
 *
 * Input: a 4-byte header, then the target's messages.
 *   [0]      bit 0 controller key (bidirectional); bits 1-2 host key
 *            (00, 01, 02, 03 transforms); bit 3: when Success1 is due and
 *            rvalid is set, put the host's expected controller response in
 *            it (a genuine controller, so that Success2 is reachable)
 *   [1..2]   transaction id, LE
 *   [3]      DH private key length (0: 32), the key taken from the
 *            messages' tail is not needed: a fixed pattern of that length
 *   then per Receive: 2 bytes LE length (capped at the buffer), the bytes.
 * Missing bytes read as zeros, as from a short Receive. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "transports/auth/auth.h"
#include "transports/nvme_spec.h"

#define HOSTNQN "nqn.2014-08.org.nvmexpress:uuid:fuzz"
#define SUBNQN "nqn.2026-01.io.example:fuzz"
#define MAX_STEPS 8

static const char *const host_keys[4] = {
	"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:",
	"DHHC-1:01:WulleCBkG4oCs0iIC3Cit9gBDCLWiZ9PNXuhqytWkBIZkvGy:",
	"DHHC-1:02:VVs4WFDR4he/PEdyN2aRGxyq3QQfAG0IjOrZpY5SEpy3sNO4KskXiBSsmbv1QV5qhB1o3g==:",
	("DHHC-1:03:J+oVHfONDF0ApBm0X0txzRS+ssen0hflDlm4K8vI2PIuvziOe79rpJrbdGG"
	 "bkcZzjyv/OE3n8cySfs8+C5k/cQ454Ic=:"),
};
static struct nvmf_dhchap_key hkeys[4], ckey;
static uint8_t fixed_c2[NVMF_DHCHAP_MAX_HASH];
static uint8_t fixed_priv[64];
static struct nvmf_auth a;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *why;

	(void)argc;
	(void)argv;
	if (!getenv("FUZZ_VERBOSE"))
		log_set_level((enum log_level)(LOG_LVL_ERR - 1));
	for (int i = 0; i < 4; i++)
		if (nvmf_dhchap_key_parse(host_keys[i], &hkeys[i], &why) < 0)
			abort();
	if (nvmf_dhchap_key_parse(host_keys[1], &ckey, &why) < 0)
		abort();
	for (unsigned i = 0; i < sizeof(fixed_c2); i++)
		fixed_c2[i] = (uint8_t)(0xc2 ^ i);
	/* A short, fixed private key: the group arithmetic stays cheap and
	 * the run reproducible. */
	for (unsigned i = 0; i < sizeof(fixed_priv); i++)
		fixed_priv[i] = (uint8_t)(0x5a + 3 * i);
	return 0;
}

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_auth: %s (state %s)\n", what, nvmf_auth_state_name(a.state));
	abort();
}

/* What the host is about to send is a well-formed message of its own. */
static void check_send(uint16_t tid, bool bidi)
{
	const struct nvmf_auth_hdr *h = (const void *)a.buf;

	if (a.len < 8 || a.len > sizeof(a.buf))
		fail("send length out of range");
	if (h->t_id != tid)
		fail("message without the transaction id");
	switch (a.state) {
	case NVMF_AUTH_SEND_NEGOTIATE:
		if (h->auth_type != NVMF_AUTH_COMMON_MESSAGES || h->auth_id != NVMF_AUTH_MSG_NEGOTIATE)
			fail("Negotiate malformed");
		break;
	case NVMF_AUTH_SEND_REPLY: {
		const struct nvmf_auth_reply *r = (const void *)a.buf;
		if (h->auth_type != NVMF_AUTH_DHCHAP_MESSAGES || h->auth_id != NVMF_AUTH_MSG_REPLY)
			fail("Reply malformed");
		if (r->hl != a.hl || !!r->cvalid != bidi ||
		    a.len != sizeof(*r) + 2u * r->hl + r->dhvlen)
			fail("Reply lengths inconsistent");
		if (bidi && !r->seqnum)
			fail("bidirectional Reply with sequence number 0");
		break;
	}
	case NVMF_AUTH_SEND_SUCCESS2:
		if (!bidi || h->auth_id != NVMF_AUTH_MSG_SUCCESS2)
			fail("Success2 without bidirectional authentication");
		break;
	case NVMF_AUTH_SEND_FAILURE2: {
		const struct nvmf_auth_failure *f = (const void *)a.buf;
		if (h->auth_type != NVMF_AUTH_COMMON_MESSAGES || h->auth_id != NVMF_AUTH_MSG_FAILURE2 ||
		    f->rescode != 1 || !f->rescode_exp || a.error >= 0)
			fail("Failure2 malformed or without an error");
		break;
	}
	default:
		fail("step returned 1 in a state with nothing to do");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return -1;
	bool bidi = data[0] & 1, genuine = data[0] & 8;
	uint16_t tid = (uint16_t)(data[1] | data[2] << 8);
	size_t privlen = data[3] % sizeof(fixed_priv);
	struct nvmf_auth_params p = {
		.name = "fuzz",
		.hostnqn = HOSTNQN,
		.subnqn = SUBNQN,
		.host_key = &hkeys[(data[0] >> 1) & 3],
		.ctrl_key = bidi ? &ckey : NULL,
		.tid = tid,
		.fixed_c2 = fixed_c2,
		.fixed_s2 = 0x51,
		.fixed_priv = fixed_priv,
		.fixed_priv_len = privlen ? privlen : 32,
	};
	const uint8_t *in = data + 4;
	size_t left = size - 4;
	bool ctrl_proved = false;
	int ret;

	memset(&a, 0, sizeof(a));
	if (nvmf_auth_begin(&a, &p) < 0)
		fail("begin failed with a host key");
	if (a.state != NVMF_AUTH_SEND_NEGOTIATE)
		fail("begin did not prepare a Negotiate");
	ret = 1;
	for (int steps = 0; ret == 1; steps++) {
		if (steps == MAX_STEPS)
			fail("transaction did not end");
		if (a.state == NVMF_AUTH_RECV_CHALLENGE || a.state == NVMF_AUTH_RECV_SUCCESS1) {
			/* The buffer to fill is all zeros, of the advertised size. */
			if (a.len != sizeof(a.buf))
				fail("Receive buffer length");
			size_t n = 0;
			if (left >= 2) {
				n = (size_t)(in[0] | in[1] << 8);
				in += 2;
				left -= 2;
			}
			if (n > left)
				n = left;
			if (n > a.len)
				n = a.len;
			memcpy(a.buf, in, n);
			in += n;
			left -= n;
			if (a.state == NVMF_AUTH_RECV_SUCCESS1 && bidi && genuine && a.hl &&
			    n >= sizeof(struct nvmf_auth_success1) && (a.buf[8] & 1)) {
				memcpy(a.buf + sizeof(struct nvmf_auth_success1), a.resp, a.hl);
				ctrl_proved = true;
			}
		} else {
			check_send(tid, bidi);
		}
		enum nvmf_auth_state before = a.state;
		ret = nvmf_auth_step(&a);
		if (ret == 1 && a.state == before)
			fail("a step that goes on must change state");
	}
	if (ret == 0) {
		if (a.state != NVMF_AUTH_DONE)
			fail("success outside DONE");
		if (bidi && !ctrl_proved)
			fail("bidirectional success without the controller's response");
	} else {
		if (a.state != NVMF_AUTH_FAILED)
			fail("failure outside FAILED");
		if (ret != -EACCES && ret != -EPROTO && ret != -ENOMEM && ret != -EIO &&
		    ret != -EINVAL)
			fail("unexpected error code");
	}
	nvmf_auth_clear(&a);
	if (a.skey)
		fail("session key left after clear");
	return 0;
}
