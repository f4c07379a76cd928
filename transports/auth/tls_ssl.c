/* The NVMe/TCP TLS 1.3 handshake's settings on an OpenSSL SSL: an external
 * PSK with the identity and key of tls_psk.c, on either side.  The I/O
 * (memory BIOs on the reactor, or a socket) is the caller's. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "transports/auth/tls_psk.h"

static int psk_index = -1;
static pthread_once_t psk_index_once = PTHREAD_ONCE_INIT;

static void psk_index_init(void)
{
	psk_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

static const SSL_CIPHER *psk_cipher(SSL *ssl, const struct nvmf_tls_psk *p)
{
	/* TLS_AES_128_GCM_SHA256 and TLS_AES_256_GCM_SHA384 (RFC 8446 B.4). */
	const unsigned char id[2] = { 0x13, p->hash == NVMF_TLS_SHA384 ? 0x02 : 0x01 };

	return SSL_CIPHER_find(ssl, id);
}

static SSL_SESSION *psk_session(SSL *ssl, const struct nvmf_tls_psk *p)
{
	const SSL_CIPHER *ci = psk_cipher(ssl, p);
	SSL_SESSION *s = ci ? SSL_SESSION_new() : NULL;

	if (s && SSL_SESSION_set1_master_key(s, p->psk, p->len) &&
	    SSL_SESSION_set_cipher(s, ci) && SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION))
		return s;
	SSL_SESSION_free(s);
	return NULL;
}

static int use_psk(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
		   SSL_SESSION **sess)
{
	const struct nvmf_tls_psk *p = SSL_get_ex_data(ssl, psk_index);
	SSL_SESSION *s;

	*sess = NULL;
	if (!p || !(s = psk_session(ssl, p)))
		return 0;
	/* After a HelloRetryRequest the suite is chosen: the PSK must match
	 * its hash, else it is not offered again. */
	if (md && md != SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(s))) {
		SSL_SESSION_free(s);
		return 1;
	}
	*id = (const unsigned char *)p->identity;
	*idlen = strlen(p->identity);
	*sess = s;
	return 1;
}

static int find_psk(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
	const struct nvmf_tls_psk *p = SSL_get_ex_data(ssl, psk_index);

	*sess = NULL;
	if (!p)
		return 0;
	/* An unknown identity: no key, the handshake goes on and fails. */
	if (idlen != strlen(p->identity) || memcmp(id, p->identity, idlen))
		return 1;
	*sess = psk_session(ssl, p);
	return *sess ? 1 : 0;
}

int nvmf_tls_ssl_setup(SSL *ssl, const struct nvmf_tls_psk *p)
{
	const char *suite = nvmf_tls_cipher(p->hash);

	pthread_once(&psk_index_once, psk_index_init);
	if (psk_index < 0 || !suite || !p->identity[0])
		return -EIO;
	if (!SSL_set_min_proto_version(ssl, TLS1_3_VERSION) ||
	    !SSL_set_max_proto_version(ssl, TLS1_3_VERSION) || !SSL_set_ciphersuites(ssl, suite) ||
	    !SSL_set_ex_data(ssl, psk_index, (void *)p))
		return -EIO;
	/* No tickets: nothing to resume (nvmet's tlshd sends none either), and
	 * no record after the handshake that is not NVMe/TCP's. */
	SSL_set_options(ssl, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
	if (SSL_is_server(ssl)) {
		SSL_set_num_tickets(ssl, 0);
		SSL_set_psk_find_session_callback(ssl, find_psk);
	} else {
		SSL_set_psk_use_session_callback(ssl, use_psk);
		/* Offering a PSK does not oblige the server to take it: one that
		 * answers with a certificate handshake instead (an impostor
		 * without the key) would be accepted under OpenSSL's default,
		 * SSL_VERIFY_NONE.  With verification on and no trust store
		 * every chain fails, so only the PSK can authenticate it. */
		SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
	}
	return 0;
}

bool nvmf_tls_ssl_psk_used(const SSL *ssl)
{
	return SSL_session_reused(ssl) == 1 && !SSL_get0_peer_certificate(ssl);
}

const char *nvmf_tls_ssl_why(char *buf, size_t len)
{
	unsigned long e = ERR_get_error(), last = e;
	const char *reason;

	/* The first error is the cause; the rest are its callers. */
	while (last)
		last = ERR_get_error();
	if (!e) {
		snprintf(buf, len, "the connection closed during the handshake");
		return buf;
	}
	reason = ERR_reason_error_string(e);
	/* What a peer with another key or identity makes each side see: the
	 * server cannot verify the binder; the client (seen with OpenSSL's
	 * s_server) gets illegal_parameter for that, and handshake_failure
	 * when the server has no key for the identity at all. */
	switch (ERR_GET_REASON(e)) {
	case SSL_R_BINDER_DOES_NOT_VERIFY:
	case SSL_R_DIGEST_CHECK_FAILED:
	case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
		snprintf(buf, len, "%s: the peer holds a different TLS key", reason ? reason : "?");
		break;
	case SSL_R_SSLV3_ALERT_ILLEGAL_PARAMETER:
		snprintf(buf, len, "%s: does the peer hold a different TLS key?", reason ? reason : "?");
		break;
	case SSL_R_CERTIFICATE_VERIFY_FAILED:
		snprintf(buf, len, "%s: the peer sent a certificate instead of using the PSK "
			 "(it does not hold the key, or is not the target)", reason ? reason : "?");
		break;
	case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
	case SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM:
		snprintf(buf, len, "%s: does the peer know this PSK identity and hash?",
			 reason ? reason : "?");
		break;
	default:
		snprintf(buf, len, "%s", reason ? reason : "unknown OpenSSL error");
	}
	return buf;
}
