/* One DH-HMAC-CHAP transaction per queue: Negotiate, Challenge, Reply,
 * Success1 and, when the host also authenticates the controller,
 * Success2; Failure1 from the controller ends it, Failure2 tells the
 * controller why the host gave up.  The state machine does no I/O, so the
 * unit tests drive it with canned controller messages; the glue at the end
 * runs it over Authentication Send/Receive on a queue. */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "gateway/base/log.h"
#include "transports/auth/auth.h"
#include "transports/ctrl.h"
#include "transports/nvme_spec.h"
#include "transports/status.h"
#include "transports/transport.h"

/* No default: -Wswitch names a state added without a name. */
const char *nvmf_auth_state_name(enum nvmf_auth_state s)
{
	switch (s) {
	case NVMF_AUTH_IDLE: return "idle";
	case NVMF_AUTH_SEND_NEGOTIATE: return "send negotiate";
	case NVMF_AUTH_RECV_CHALLENGE: return "receive challenge";
	case NVMF_AUTH_SEND_REPLY: return "send reply";
	case NVMF_AUTH_RECV_SUCCESS1: return "receive success1";
	case NVMF_AUTH_SEND_SUCCESS2: return "send success2";
	case NVMF_AUTH_SEND_FAILURE2: return "send failure2";
	case NVMF_AUTH_DONE: return "done";
	case NVMF_AUTH_FAILED: return "failed";
	}
	return "?";
}

static void set_state(struct nvmf_auth *a, enum nvmf_auth_state s)
{
	log_debug("%s: auth: %s -> %s", a->p.name, nvmf_auth_state_name(a->state),
		  nvmf_auth_state_name(s));
	a->state = s;
}

static const char *fail_exp_name(uint8_t exp)
{
	switch (exp) {
	case NVMF_AUTH_FAIL_FAILED: return "authentication failed";
	case NVMF_AUTH_FAIL_NOT_USABLE: return "protocol not usable";
	case NVMF_AUTH_FAIL_CONCAT_MISMATCH: return "secure channel concatenation mismatch";
	case NVMF_AUTH_FAIL_HASH_UNUSABLE: return "hash function not usable";
	case NVMF_AUTH_FAIL_DHGROUP_UNUSABLE: return "DH group not usable";
	case NVMF_AUTH_FAIL_INCORRECT_PAYLOAD: return "incorrect payload";
	case NVMF_AUTH_FAIL_INCORRECT_MESSAGE: return "incorrect protocol message";
	default: return "unknown reason";
	}
}

void nvmf_auth_clear(struct nvmf_auth *a)
{
	if (a->skey) {
		OPENSSL_cleanse(a->skey, a->sklen);
		free(a->skey);
		a->skey = NULL;
	}
	OPENSSL_cleanse(a->buf, sizeof(a->buf));
	OPENSSL_cleanse(a->resp, sizeof(a->resp));
	OPENSSL_cleanse(a->c1, sizeof(a->c1));
	OPENSSL_cleanse(a->c2, sizeof(a->c2));
}

/* The host gives up: Failure2 goes out, then the transaction ends with err. */
__attribute__((format(printf, 4, 5)))
static int fail2(struct nvmf_auth *a, uint8_t exp, int err, const char *fmt, ...)
{
	struct nvmf_auth_failure *f = (struct nvmf_auth_failure *)a->buf;
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_err("%s: authentication failed with %s: %s", a->p.name, a->p.subnqn, msg);
	a->error = err;
	a->fail_exp = exp;
	memset(a->buf, 0, sizeof(a->buf));
	f->auth_type = NVMF_AUTH_COMMON_MESSAGES;
	f->auth_id = NVMF_AUTH_MSG_FAILURE2;
	f->t_id = a->p.tid;
	f->rescode = 0x01;
	f->rescode_exp = exp;
	a->len = sizeof(*f);
	set_state(a, NVMF_AUTH_SEND_FAILURE2);
	return 1;
}

int nvmf_auth_begin(struct nvmf_auth *a, const struct nvmf_auth_params *p)
{
	struct nvmf_auth_negotiate *n = (struct nvmf_auth_negotiate *)a->buf;

	memset(a, 0, offsetof(struct nvmf_auth, q));
	a->p = *p;
	if (!p->host_key || !p->host_key->len) {
		log_err("%s: authentication failed with %s: the target requires DH-HMAC-CHAP "
			"and no dhchap_secret is configured",
			p->name, p->subnqn);
		a->state = NVMF_AUTH_FAILED;
		return -ENOKEY;
	}
	n->auth_type = NVMF_AUTH_COMMON_MESSAGES;
	n->auth_id = NVMF_AUTH_MSG_NEGOTIATE;
	n->t_id = p->tid;
	n->sc_c = 0; /* no secure channel concatenation (no TLS here) */
	n->napd = 1;
	n->proto[0].authid = NVMF_AUTH_ID_DHCHAP;
	n->proto[0].halen = 3;
	n->proto[0].dhlen = 6;
	n->proto[0].idlist[0] = NVMF_DHCHAP_SHA256;
	n->proto[0].idlist[1] = NVMF_DHCHAP_SHA384;
	n->proto[0].idlist[2] = NVMF_DHCHAP_SHA512;
	for (uint8_t g = NVMF_DHCHAP_DH_NULL; g <= NVMF_DHCHAP_DH_8192; g++)
		n->proto[0].idlist[30 + g] = g;
	a->len = sizeof(*n);
	set_state(a, NVMF_AUTH_SEND_NEGOTIATE);
	return 0;
}

static void expect_recv(struct nvmf_auth *a, enum nvmf_auth_state s)
{
	memset(a->buf, 0, sizeof(a->buf));
	a->len = sizeof(a->buf);
	set_state(a, s);
}

/* 0 when buf holds the DH-HMAC-CHAP message `id` of this transaction;
 * -EACCES after Failure1; 1 when fail2 was started. */
static int check_msg(struct nvmf_auth *a, uint8_t id, const char *what)
{
	const struct nvmf_auth_hdr *h = (const struct nvmf_auth_hdr *)a->buf;

	if (h->auth_type == NVMF_AUTH_COMMON_MESSAGES && h->auth_id == NVMF_AUTH_MSG_FAILURE1) {
		const struct nvmf_auth_failure *f = (const struct nvmf_auth_failure *)a->buf;
		log_err("%s: authentication failed with %s: the controller refused (Failure1 "
			"in place of %s: %s, reason 0x%02x/0x%02x); check dhchap_secret and the "
			"target's dhchap_key for host %s",
			a->p.name, a->p.subnqn, what, fail_exp_name(f->rescode_exp), f->rescode,
			f->rescode_exp, a->p.hostnqn);
		a->error = -EACCES;
		set_state(a, NVMF_AUTH_FAILED);
		return -EACCES;
	}
	if (h->auth_type != NVMF_AUTH_DHCHAP_MESSAGES || h->auth_id != id)
		return fail2(a, NVMF_AUTH_FAIL_INCORRECT_MESSAGE, -EPROTO,
			     "expected %s, got message type 0x%02x id 0x%02x", what, h->auth_type,
			     h->auth_id);
	if (h->t_id != a->p.tid)
		return fail2(a, NVMF_AUTH_FAIL_INCORRECT_MESSAGE, -EPROTO,
			     "%s for transaction %u, expected %u", what, h->t_id, a->p.tid);
	return 0;
}

static int random_bytes(void *p, size_t n)
{
	return RAND_bytes(p, (int)n) == 1 ? 0 : -EIO;
}

/* The challenge as the response hashes it: with a DH group, augmented. */
static int effective_challenge(struct nvmf_auth *a, const uint8_t *c, uint8_t *out)
{
	if (!a->skey) {
		memcpy(out, c, a->hl);
		return 0;
	}
	return nvmf_dhchap_augment(a->hashid, a->skey, a->sklen, c, out);
}

static int on_challenge(struct nvmf_auth *a)
{
	const struct nvmf_auth_challenge *ch = (const struct nvmf_auth_challenge *)a->buf;
	struct nvmf_auth_reply *r;
	struct nvmf_dh *dh = NULL;
	uint8_t tkey[NVMF_DHCHAP_MAX_HASH], chal[NVMF_DHCHAP_MAX_HASH];
	uint8_t host_resp[NVMF_DHCHAP_MAX_HASH];
	uint8_t pub[1024];
	size_t tklen, dhlen;
	bool bidi = a->p.ctrl_key && a->p.ctrl_key->len;
	int gbytes, ret;

	if ((ret = check_msg(a, NVMF_AUTH_MSG_CHALLENGE, "Challenge")))
		return ret < 0 ? ret : 1;
	a->hashid = ch->hashid;
	a->dhgid = ch->dhgid;
	a->hl = nvmf_dhchap_hash_len(ch->hashid);
	if (!a->hl)
		return fail2(a, NVMF_AUTH_FAIL_HASH_UNUSABLE, -EPROTO,
			     "the controller chose hash 0x%02x, which was not offered", ch->hashid);
	if (ch->hl != a->hl)
		return fail2(a, NVMF_AUTH_FAIL_HASH_UNUSABLE, -EPROTO,
			     "challenge length %u for %s (expected %zu)", ch->hl,
			     nvmf_dhchap_hash_name(ch->hashid), a->hl);
	gbytes = nvmf_dh_group_bytes(ch->dhgid);
	if (gbytes < 0)
		return fail2(a, NVMF_AUTH_FAIL_DHGROUP_UNUSABLE, -EPROTO,
			     "the controller chose DH group 0x%02x, which was not offered",
			     ch->dhgid);
	if ((gbytes == 0 && ch->dhvlen) || (gbytes && (!ch->dhvlen || ch->dhvlen > gbytes)))
		return fail2(a, NVMF_AUTH_FAIL_INCORRECT_PAYLOAD, -EPROTO,
			     "DH value of %u bytes for group %s", ch->dhvlen,
			     nvmf_dhchap_dhgroup_name(ch->dhgid));
	a->s1 = ch->seqnum;
	memcpy(a->c1, a->buf + sizeof(*ch), a->hl);
	dhlen = (size_t)gbytes;
	if (gbytes) {
		ret = nvmf_dh_new(ch->dhgid, a->p.fixed_priv, a->p.fixed_priv_len, &dh);
		if (ret < 0)
			return fail2(a, NVMF_AUTH_FAIL_FAILED, ret, "cannot set up %s",
				     nvmf_dhchap_dhgroup_name(ch->dhgid));
		a->sklen = dhlen;
		a->skey = malloc(dhlen);
		if (!a->skey || nvmf_dh_public(dh, pub, dhlen) < 0 ||
		    nvmf_dh_derive(dh, a->buf + sizeof(*ch) + a->hl, ch->dhvlen, a->skey, dhlen) <
			    0) {
			nvmf_dh_free(dh);
			return fail2(a, NVMF_AUTH_FAIL_INCORRECT_PAYLOAD, -EPROTO,
				     "the controller's %s value is not usable",
				     nvmf_dhchap_dhgroup_name(ch->dhgid));
		}
		nvmf_dh_free(dh);
	}

	ret = nvmf_dhchap_transform_key(a->p.host_key, a->p.hostnqn, tkey, &tklen);
	if (!ret)
		ret = effective_challenge(a, a->c1, chal);
	if (!ret)
		ret = nvmf_dhchap_response(a->hashid, tkey, tklen, chal, a->s1, a->p.tid, 0,
					   "HostHost", a->p.hostnqn, a->p.subnqn, host_resp);
	if (ret)
		goto crypto_fail;
	if (bidi) {
		if (a->p.fixed_c2) {
			memcpy(a->c2, a->p.fixed_c2, a->hl);
			a->s2 = a->p.fixed_s2;
		} else {
			ret = random_bytes(a->c2, a->hl);
			while (!ret && !a->s2)
				ret = random_bytes(&a->s2, sizeof(a->s2));
		}
		if (!ret)
			ret = nvmf_dhchap_transform_key(a->p.ctrl_key, a->p.subnqn, tkey, &tklen);
		if (!ret)
			ret = effective_challenge(a, a->c2, chal);
		if (!ret)
			ret = nvmf_dhchap_response(a->hashid, tkey, tklen, chal, a->s2, a->p.tid, 0,
						   "Controller", a->p.subnqn, a->p.hostnqn,
						   a->resp);
		if (ret)
			goto crypto_fail;
	}
	OPENSSL_cleanse(tkey, sizeof(tkey));

	memset(a->buf, 0, sizeof(a->buf));
	r = (struct nvmf_auth_reply *)a->buf;
	r->auth_type = NVMF_AUTH_DHCHAP_MESSAGES;
	r->auth_id = NVMF_AUTH_MSG_REPLY;
	r->t_id = a->p.tid;
	r->hl = (uint8_t)a->hl;
	r->cvalid = bidi;
	r->dhvlen = (uint16_t)dhlen;
	r->seqnum = bidi ? a->s2 : 0;
	memcpy(a->buf + sizeof(*r), host_resp, a->hl);
	if (bidi)
		memcpy(a->buf + sizeof(*r) + a->hl, a->c2, a->hl);
	memcpy(a->buf + sizeof(*r) + 2 * a->hl, pub, dhlen);
	a->len = sizeof(*r) + 2 * a->hl + dhlen;
	set_state(a, NVMF_AUTH_SEND_REPLY);
	return 1;

crypto_fail:
	OPENSSL_cleanse(tkey, sizeof(tkey));
	return fail2(a, NVMF_AUTH_FAIL_FAILED, ret, "computing the response: %s", strerror(-ret));
}

static int on_success1(struct nvmf_auth *a)
{
	const struct nvmf_auth_success1 *s = (const struct nvmf_auth_success1 *)a->buf;
	bool bidi = a->p.ctrl_key && a->p.ctrl_key->len;
	int ret;

	if ((ret = check_msg(a, NVMF_AUTH_MSG_SUCCESS1, "Success1")))
		return ret < 0 ? ret : 1;
	if (s->hl != a->hl)
		return fail2(a, NVMF_AUTH_FAIL_HASH_UNUSABLE, -EPROTO,
			     "Success1 with hash length %u, expected %zu", s->hl, a->hl);
	if (!bidi && (s->rvalid & 1))
		/* A response to a challenge the host never sent (cvalid 0):
		 * the controller does not follow the protocol, and would wait
		 * for a Success2 that never comes.  Linux refuses it too. */
		return fail2(a, NVMF_AUTH_FAIL_INCORRECT_MESSAGE, -EPROTO,
			     "Success1 answers a challenge the host did not send");
	if (!bidi) {
		log_info("%s: authenticated to %s (DH-HMAC-CHAP %s, %s)", a->p.name, a->p.subnqn,
			 nvmf_dhchap_hash_name(a->hashid), nvmf_dhchap_dhgroup_name(a->dhgid));
		set_state(a, NVMF_AUTH_DONE);
		return 0;
	}
	if (!(s->rvalid & 1))
		return fail2(a, NVMF_AUTH_FAIL_FAILED, -EACCES,
			     "the controller did not answer the host's challenge");
	if (CRYPTO_memcmp(a->buf + sizeof(*s), a->resp, a->hl))
		return fail2(a, NVMF_AUTH_FAIL_FAILED, -EACCES,
			     "the controller's response is wrong (check dhchap_ctrl_secret "
			     "against the target's dhchap_ctrl_key)");
	struct nvmf_auth_success2 *s2 = (struct nvmf_auth_success2 *)a->buf;
	memset(a->buf, 0, sizeof(a->buf));
	s2->auth_type = NVMF_AUTH_DHCHAP_MESSAGES;
	s2->auth_id = NVMF_AUTH_MSG_SUCCESS2;
	s2->t_id = a->p.tid;
	a->len = sizeof(*s2);
	set_state(a, NVMF_AUTH_SEND_SUCCESS2);
	return 1;
}

int nvmf_auth_step(struct nvmf_auth *a)
{
	switch (a->state) {
	case NVMF_AUTH_SEND_NEGOTIATE:
		expect_recv(a, NVMF_AUTH_RECV_CHALLENGE);
		return 1;
	case NVMF_AUTH_RECV_CHALLENGE:
		return on_challenge(a);
	case NVMF_AUTH_SEND_REPLY:
		expect_recv(a, NVMF_AUTH_RECV_SUCCESS1);
		return 1;
	case NVMF_AUTH_RECV_SUCCESS1:
		return on_success1(a);
	case NVMF_AUTH_SEND_SUCCESS2:
		log_info("%s: authenticated to %s, and it to us (DH-HMAC-CHAP %s, %s)", a->p.name,
			 a->p.subnqn, nvmf_dhchap_hash_name(a->hashid),
			 nvmf_dhchap_dhgroup_name(a->dhgid));
		set_state(a, NVMF_AUTH_DONE);
		return 0;
	case NVMF_AUTH_SEND_FAILURE2:
		set_state(a, NVMF_AUTH_FAILED);
		return a->error;
	case NVMF_AUTH_IDLE:
	case NVMF_AUTH_DONE:
	case NVMF_AUTH_FAILED:
		break;
	}
	return -EINVAL;
}

/* ---- on a queue ---- */

static void auth_finish(struct nvmf_auth *a, int err)
{
	struct nvmf_queue *q = a->q;
	void (*done)(struct nvmf_queue *, int) = a->done;

	if (!err && q->ctrl) /* queues authenticate on their own reactors */
		__atomic_store_n(&q->ctrl->auth_ok, true, __ATOMIC_RELAXED);
	nvmf_auth_clear(a);
	free(a);
	done(q, err);
}

static void auth_issue(struct nvmf_auth *a);

static void auth_cmd_done(struct nvmf_req *req, int err)
{
	struct nvmf_auth *a = req->ctx;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	bool send = req->host_to_ctrl;
	char sbuf[96];
	int ret;

	nvmf_req_put(req);
	if (err) {
		/* The queue is going down; its connect_cb reports with q->error.
		 * nvmet answers a wrong response with Failure1 and tears the
		 * association down at the same moment; on RDMA the disconnect
		 * often wins and the Failure1 never arrives.  A connection
		 * closed while the verdict on our response was due is that
		 * refusal: reported as such, so that the path is not retried.
		 * Unless this controller's key was accepted before: then it is
		 * more likely a lost connection (a reset, a target restart),
		 * and deleting the path for good over one would turn a blip
		 * into an outage.  It is retried; a key the target no longer
		 * takes ends it at ctrl_loss_tmo (over TCP, Failure1 at once). */
		if (a->state == NVMF_AUTH_RECV_SUCCESS1 && a->q->ctrl &&
		    __atomic_load_n(&a->q->ctrl->auth_ok, __ATOMIC_RELAXED)) {
			log_warn("%s: the connection to %s closed while the verdict on the host's "
				 "response was due; this key was accepted before: retried",
				 a->p.name, a->p.subnqn);
		} else if (a->state == NVMF_AUTH_RECV_SUCCESS1) {
			log_err("%s: authentication failed with %s: the target closed the connection "
				"instead of accepting the host's response; check dhchap_secret and the "
				"target's dhchap_key for host %s",
				a->p.name, a->p.subnqn, a->p.hostnqn);
			a->q->error = -EACCES;
		}
		nvmf_auth_clear(a);
		free(a);
		return;
	}
	if (st) {
		/* A target that refuses the protocol (DNR) refuses it next time
		 * too; a status that may pass (an interrupted command, a
		 * controller busy) is a retry, not a refused host. */
		bool dnr = NVME_STATUS_DNR(st);
		log_err("%s: authentication failed with %s: Authentication %s rejected in state "
			"%s: %s%s",
			a->p.name, a->p.subnqn, send ? "Send" : "Receive",
			nvmf_auth_state_name(a->state), nvme_status_fmt(st, sbuf, sizeof(sbuf)),
			dnr ? "" : "; retried");
		auth_finish(a, dnr ? -EACCES : -EIO);
		return;
	}
	ret = nvmf_auth_step(a);
	if (ret == 1)
		auth_issue(a);
	else
		auth_finish(a, ret);
}

static void auth_issue(struct nvmf_auth *a)
{
	struct nvmf_req *req = nvmf_req_get(a->q);
	bool send = a->state != NVMF_AUTH_RECV_CHALLENGE && a->state != NVMF_AUTH_RECV_SUCCESS1;
	struct nvmf_auth_cmd *c;
	struct iovec iov = { a->buf, a->len };

	if (!req) {
		log_err("%s: no request for authentication", a->p.name);
		auth_finish(a, -ENOMEM);
		return;
	}
	c = (struct nvmf_auth_cmd *)&req->sqe;
	c->opcode = NVME_FABRICS_COMMAND;
	c->fctype = send ? NVMF_FCTYPE_AUTH_SEND : NVMF_FCTYPE_AUTH_RECV;
	c->secp = NVMF_AUTH_SECP_DHCHAP;
	c->spsp0 = 0x01;
	c->spsp1 = 0x01;
	c->len = (uint32_t)a->len;
	nvmf_req_set_data(req, &iov, 1, (uint32_t)a->len, send);
	req->done = auth_cmd_done;
	req->ctx = a;
	nvmf_req_submit(req);
}

int nvmf_auth_check_unasked(const struct nvmf_queue *q)
{
	if (!q->ctrl->opts.dhchap_ctrl_key.len)
		return 0;
	log_err("%s: the target did not authenticate itself: a controller key "
		"(dhchap_ctrl_secret) is configured but its Connect response did not ask "
		"for DH-HMAC-CHAP; refusing the connection",
		q->name);
	return -EACCES;
}

void nvmf_queue_authenticate(struct nvmf_queue *q, void (*done)(struct nvmf_queue *q, int err))
{
	static _Atomic uint16_t next_tid;
	struct nvmf_ctrl *c = q->ctrl;
	struct nvmf_auth *a = malloc(sizeof(*a));
	struct nvmf_auth_params p = {
		.name = q->name,
		.hostnqn = c->opts.hostnqn,
		.subnqn = c->opts.subnqn,
		.host_key = &c->opts.dhchap_key,
		.ctrl_key = &c->opts.dhchap_ctrl_key,
		.tid = atomic_fetch_add(&next_tid, 1),
	};
	int ret;

	if (!a) {
		done(q, -ENOMEM);
		return;
	}
	ret = nvmf_auth_begin(a, &p);
	a->q = q;
	a->done = done;
	if (ret < 0) {
		/* No key at all: -EACCES, fatal for the path like a wrong one. */
		auth_finish(a, -EACCES);
		return;
	}
	log_debug("%s: DH-HMAC-CHAP transaction %u", q->name, p.tid);
	auth_issue(a);
}
