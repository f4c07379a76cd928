/* NVMe in-band authentication (DH-HMAC-CHAP, TP 8006 / NVMe base spec 2.0
 * section 8.13): the secrets, the transforms, the Diffie-Hellman exchange
 * and the per-queue transaction run over Fabrics Authentication
 * Send/Receive right after a Connect that asked for it.
 *
 * The crypto comes from OpenSSL's libcrypto: it is Debian's standard
 * library for it and has HMAC, SHA-2 and the RFC 7919 FFDHE named groups
 * through EVP_PKEY, so no group prime is typed in here. */
#ifndef TRANSPORTS_AUTH_H
#define TRANSPORTS_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NVMF_DHCHAP_MAX_HASH 64
/* Every message fits: the largest is a Reply with an ffdhe8192 value. */
#define NVMF_AUTH_BUF_SIZE 4096

struct nvmf_queue;

/* A secret as "DHHC-1:XX:base64(key || crc32):" carries it. */
struct nvmf_dhchap_key {
	uint8_t hmac; /* XX: 0 = used as is, else the hash of the transform */
	uint8_t len; /* 32, 48 or 64; 0 = no key */
	uint8_t key[64];
};

/* 0, or -EINVAL with *why saying what is wrong (never the secret). */
int nvmf_dhchap_key_parse(const char *s, struct nvmf_dhchap_key *out, const char **why);

/* The body shared by "DHHC-1:" secrets and "NVMeTLSkey-1:" TLS PSKs (both
 * from nvme-cli/libnvme): n characters of base64(key || CRC-32 LE).  The
 * key, of one of the lengths in lens (0-terminated), goes to out.  0;
 * -EINVAL with *why for bad base64 or a CRC mismatch; -EMSGSIZE for any
 * other length, which the caller explains in its own format's terms. */
int nvmf_key_decode_b64crc(const char *b64, size_t n, const uint8_t *lens, uint8_t *out,
			   size_t *klen, const char **why);

/* Digest bytes of a hash identifier; 0 when unknown. */
size_t nvmf_dhchap_hash_len(uint8_t hashid);
const char *nvmf_dhchap_hash_name(uint8_t hashid);
const char *nvmf_dhchap_dhgroup_name(uint8_t dhgid);
/* Bytes of a group's prime (= its public values and shared secret);
 * 0 for NULL, -1 when unknown. */
int nvmf_dh_group_bytes(uint8_t dhgid);

int nvmf_dhchap_hmac(uint8_t hashid, const void *key, size_t klen, const void *data,
		     size_t dlen, uint8_t *out);
/* HMAC(key, nqn || "NVMe-over-Fabrics") with the key's own hash, or the
 * key as it is for XX = 00. */
int nvmf_dhchap_transform_key(const struct nvmf_dhchap_key *k, const char *nqn,
			      uint8_t out[NVMF_DHCHAP_MAX_HASH], size_t *outlen);
/* The challenge with the DH session key folded in:
 * HMAC(H(session key), challenge). */
int nvmf_dhchap_augment(uint8_t hashid, const uint8_t *skey, size_t sklen,
			const uint8_t *chal, uint8_t *out);
/* HMAC(tkey, chal || seq || tid || sc_c || role || nqn_a || 0 || nqn_b):
 * role "HostHost" with hostnqn, subnqn for the host's response,
 * "Controller" with subnqn, hostnqn for the controller's. */
int nvmf_dhchap_response(uint8_t hashid, const uint8_t *tkey, size_t tklen,
			 const uint8_t *chal, uint32_t seq, uint16_t tid, uint8_t sc_c,
			 const char *role, const char *nqn_a, const char *nqn_b, uint8_t *out);

/* One side of a finite-field Diffie-Hellman exchange in an FFDHE group. */
struct nvmf_dh;
/* priv NULL: a fresh random private key. */
int nvmf_dh_new(uint8_t dhgid, const uint8_t *priv, size_t privlen, struct nvmf_dh **out);
/* The public value, left-padded to the prime's size (len). */
int nvmf_dh_public(const struct nvmf_dh *dh, uint8_t *out, size_t len);
/* The shared secret, left-padded to the prime's size (len), as the
 * Linux target computes it. -EPROTO for a public value out of range. */
int nvmf_dh_derive(struct nvmf_dh *dh, const uint8_t *peer, size_t plen, uint8_t *out,
		   size_t len);
void nvmf_dh_free(struct nvmf_dh *dh);

/* ---- one transaction, as a state machine without I/O ---- */

enum nvmf_auth_state {
	NVMF_AUTH_IDLE,
	NVMF_AUTH_SEND_NEGOTIATE,
	NVMF_AUTH_RECV_CHALLENGE,
	NVMF_AUTH_SEND_REPLY,
	NVMF_AUTH_RECV_SUCCESS1,
	NVMF_AUTH_SEND_SUCCESS2,
	NVMF_AUTH_SEND_FAILURE2,
	NVMF_AUTH_DONE,
	NVMF_AUTH_FAILED,
};

struct nvmf_auth_params {
	const char *name; /* log prefix: the queue's */
	const char *hostnqn;
	const char *subnqn;
	const struct nvmf_dhchap_key *host_key;
	const struct nvmf_dhchap_key *ctrl_key; /* len 0: no bidirectional */
	uint16_t tid;
	/* Tests only: fixed C2, S2 and DH private key instead of random. */
	const uint8_t *fixed_c2;
	uint32_t fixed_s2;
	const uint8_t *fixed_priv;
	size_t fixed_priv_len;
};

struct nvmf_auth {
	enum nvmf_auth_state state;
	struct nvmf_auth_params p;
	int error; /* the result once FAILED (after Failure2 was sent) */
	uint8_t fail_exp; /* reason code explanation for Failure2 */
	uint8_t hashid, dhgid;
	size_t hl;
	uint32_t s1, s2;
	uint8_t c1[NVMF_DHCHAP_MAX_HASH], c2[NVMF_DHCHAP_MAX_HASH];
	uint8_t resp[NVMF_DHCHAP_MAX_HASH]; /* the controller's expected one */
	uint8_t *skey; /* DH session key */
	size_t sklen;
	/* In SEND_* states the message to send (len bytes); in RECV_* states
	 * the buffer the Receive fills (len = AL). */
	size_t len;
	uint8_t buf[NVMF_AUTH_BUF_SIZE];
	/* The glue to a queue. */
	struct nvmf_queue *q;
	void (*done)(struct nvmf_queue *q, int err);
};

const char *nvmf_auth_state_name(enum nvmf_auth_state s);
/* Prepares the Negotiate message.  -ENOKEY without a host key. */
int nvmf_auth_begin(struct nvmf_auth *a, const struct nvmf_auth_params *p);
/* The command of the current state completed (a Receive's data is in
 * buf).  1: another command is due (see state and len); 0: authenticated;
 * -errno: failed, reason logged (-EACCES for refused credentials,
 * -EPROTO for a malformed message). */
int nvmf_auth_step(struct nvmf_auth *a);
/* Wipes the secrets the transaction held. */
void nvmf_auth_clear(struct nvmf_auth *a);

/* Runs the transaction on q (in FABRIC_CONNECT, after a Connect whose
 * response asked for it), reactor-driven; done(q, err) on q's reactor.
 * When the queue itself goes down meanwhile, done is not called: the
 * queue's own connect_cb reports. */
void nvmf_queue_authenticate(struct nvmf_queue *q, void (*done)(struct nvmf_queue *q, int err));

/* The Connect response on q did not ask to authenticate.  With a controller
 * key configured that is a target which cannot prove who it is (the host
 * would send its data to any impostor): -EACCES, logged, and not retried
 * by the callers, like refused credentials.  0 otherwise. */
int nvmf_auth_check_unasked(const struct nvmf_queue *q);

#endif
