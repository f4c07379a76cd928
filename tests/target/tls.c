/* The test target's NVMe/TCP TLS 1.3 server (--tls-key): OpenSSL on the
 * non-blocking socket itself, which is simpler than memory BIOs and fine
 * for a test tool.  The key is the interchange key nvme-cli writes; the
 * TLS PSK is derived from it and the NQNs in the identity the host
 * offers, as nvmet's keyring would hold it for that host and subsystem. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "gateway/base/log.h"
#include "tests/target/tgt.h"
#include "transports/auth/tls_psk.h"

static SSL_CTX *ctx;
static struct nvmf_tls_key key;
static enum nvmf_tls_kdf kdf = NVMF_TLS_KDF_COMPAT;

static int find_psk(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
	struct tgt_conn *c = SSL_get_app_data(ssl);
	char ident[NVMF_TLS_IDENTITY_SIZE], host[NVMF_NQN_SIZE], sub[NVMF_NQN_SIZE];
	unsigned ver, hh;
	struct nvmf_tls_psk p;
	const unsigned char cid[2] = { 0x13, key.hash == NVMF_TLS_SHA384 ? 0x02 : 0x01 };
	const SSL_CIPHER *ci = SSL_CIPHER_find(ssl, cid);
	SSL_SESSION *s;

	*sess = NULL;
	if (idlen >= sizeof(ident))
		return 1;
	memcpy(ident, id, idlen);
	ident[idlen] = 0;
	/* "NVMe0R0H hostnqn subnqn": an unknown form leaves no key. */
	if (sscanf(ident, "NVMe%1uR%2u %222s %222s", &ver, &hh, host, sub) != 4 || ver != 0 ||
	    hh != key.hash) {
		log_warn("%s: TLS: unknown PSK identity '%s'", c->peer, ident);
		return 1;
	}
	if (nvmf_tls_derive(&key, host, sub, 0, kdf, &p) < 0 || strcmp(p.identity, ident))
		return 1;
	s = ci ? SSL_SESSION_new() : NULL;
	if (!s || !SSL_SESSION_set1_master_key(s, p.psk, p.len) || !SSL_SESSION_set_cipher(s, ci) ||
	    !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
		SSL_SESSION_free(s);
		nvmf_tls_psk_clear(&p);
		return 0;
	}
	nvmf_tls_psk_clear(&p);
	log_info("%s: TLS PSK identity '%s'", c->peer, ident);
	*sess = s;
	return 1;
}

int tgt_tls_setup(const char *line, const char *kdf_name)
{
	const char *why = NULL;

	if (nvmf_tls_key_parse(line, &key, &why) < 0) {
		fprintf(stderr, "nvmf-test-target: --tls-key: %s\n", why);
		return -1;
	}
	if (kdf_name && !strcmp(kdf_name, "rfc8446"))
		kdf = NVMF_TLS_KDF_RFC8446;
	else if (kdf_name && strcmp(kdf_name, "compat")) {
		fprintf(stderr, "nvmf-test-target: --tls-kdf: compat or rfc8446\n");
		return -1;
	}
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx)
		return -1;
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
	SSL_CTX_set_ciphersuites(ctx, nvmf_tls_cipher(key.hash));
	SSL_CTX_set_num_tickets(ctx, 0);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_psk_find_session_callback(ctx, find_psk);
	T.tls = true;
	return 0;
}

int tgt_tls_conn(struct tgt_conn *c)
{
	if (!ctx || T.ports[c->port].plain)
		return 0;
	if (T.ports[c->port].treq == 3 && !c->tls_sniff) {
		c->tls_sniff = true; /* tgt_tls_sniff decides */
		return 0;
	}
	c->ssl = SSL_new(ctx);
	if (!c->ssl || !SSL_set_fd(c->ssl, c->fd))
		return -ENOMEM;
	SSL_set_app_data(c->ssl, c);
	SSL_set_accept_state(c->ssl);
	return 0;
}

int tgt_tls_sniff(struct tgt_conn *c)
{
	unsigned char b;
	ssize_t r = recv(c->fd, &b, 1, MSG_PEEK);

	if (r <= 0)
		return r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ? -1 : 0;
	/* A TLS handshake record; an ICReq PDU starts with type 0. */
	if (b == 0x16 && tgt_tls_conn(c) < 0)
		return -1;
	c->tls_sniff = false;
	fprintf(stderr, "nvmf-test-target: port %u: %s connection from %s\n", c->port + 1,
		c->ssl ? "TLS" : "plaintext", c->peer);
	return 1;
}

static void tls_why(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	snprintf(buf, len, "%s", r ? r : "the connection closed");
	ERR_clear_error();
}

/* --tls-ku-flood: a hostile peer that reads nothing and asks for key
 * updates (each one obliges the host to answer) for T.tls_ku_flood
 * seconds.  Blocks the target meanwhile: a test tool's shortcut. */
static void ku_flood(struct tgt_conn *c)
{
	time_t end = time(NULL) + T.tls_ku_flood;
	unsigned long n = 0;

	while (time(NULL) < end && SSL_key_update(c->ssl, SSL_KEY_UPDATE_REQUESTED)) {
		int r;
		while ((r = SSL_do_handshake(c->ssl)) != 1) {
			if (SSL_get_error(c->ssl, r) != SSL_ERROR_WANT_WRITE)
				goto out;
			struct pollfd pf = { .fd = c->fd, .events = POLLOUT };
			poll(&pf, 1, 100);
			if (time(NULL) >= end)
				goto out;
		}
		n++;
	}
out:
	ERR_clear_error();
	log_notice("%s: TLS key update flood: %lu requests sent", c->peer, n);
}

/* -1: closed (logged); 0: wait for more; 1: the handshake is done. */
int tgt_tls_handshake(struct tgt_conn *c)
{
	char why[200], msg[256];
	int r;

	if (c->tls_up)
		return 1;
	ERR_clear_error();
	r = SSL_do_handshake(c->ssl);
	if (r == 1) {
		c->tls_up = true;
		log_info("%s: TLS up (%s, %s)", c->peer, SSL_get_version(c->ssl),
			 SSL_get_cipher_name(c->ssl));
		if (T.tls_ku_flood)
			ku_flood(c);
		return 1;
	}
	int e = SSL_get_error(c->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return 0;
	tls_why(why, sizeof(why));
	snprintf(msg, sizeof(msg), "TLS handshake failed: %s", why);
	log_warn("%s: %s", c->peer, msg);
	conn_close(c, msg);
	return -1;
}

ssize_t tgt_tls_read(struct tgt_conn *c, void *buf, size_t len)
{
	size_t got;
	char why[200];

	ERR_clear_error();
	if (SSL_read_ex(c->ssl, buf, len, &got))
		return (ssize_t)got;
	switch (SSL_get_error(c->ssl, 0)) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		if (!errno)
			return 0;
		return -1;
	default:
		/* A host that ends without close_notify (its admin queue
		 * resets with the AER outstanding) has just closed. */
		if (ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
			ERR_clear_error();
			return 0;
		}
		tls_why(why, sizeof(why));
		log_warn("%s: TLS receive: %s", c->peer, why);
		errno = EPROTO;
		return -1;
	}
}

ssize_t tgt_tls_write(struct tgt_conn *c, const void *buf, size_t len)
{
	size_t w;

	ERR_clear_error();
	if (SSL_write_ex(c->ssl, buf, len, &w))
		return (ssize_t)w;
	switch (SSL_get_error(c->ssl, 0)) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		errno = EAGAIN;
		return -1;
	default:
		if (!errno)
			errno = EPIPE;
		return -1;
	}
}

void tgt_tls_free(struct tgt_conn *c)
{
	SSL_free(c->ssl);
	c->ssl = NULL;
}
