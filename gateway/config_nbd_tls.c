/* The NBD listener's TLS keys (exports[].nbd: tls, tls_psk_file,
 * tls_certificates, tls_verify_peer), checked as a whole once the export
 * is parsed (and tls_max_handshakes, the listener's bound on handshakes in
 * progress): the credentials are loaded here as the server will load them,
 * so that `nvmf-gateway check` finds a bad key file before a start does. */
#include <errno.h>
#include <libconfig.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "gateway/config_priv.h"
#include "nbd/nbd.h"

/* The setting to point an error at: the key if present, else the group. */
static const config_setting_t *at(const config_setting_t *nbd, const char *key)
{
	const config_setting_t *s = config_setting_get_member(nbd, key);

	return s ? s : nbd;
}

void cfg_check_nbd_tls(struct ctx *c, struct gw_export *e, const config_setting_t *nbd, size_t i)
{
	struct gw_nbd *n = &e->nbd;
	struct nbd_tls *t;
	char path[PATH_LEN], err[512], key[4096 + 32];

	if (!nbd)
		return;
	if (n->tls == NBD_TLS_OFF) {
		if (n->tls_psk_file || n->tls_certificates || n->tls_verify_peer)
			err_at(c, at(nbd, n->tls_psk_file ? "tls_psk_file" : n->tls_certificates ?
						"tls_certificates" : "tls_verify_peer"),
			       "exports[%zu].nbd: TLS credentials given but tls is off "
			       "(tls = \"on\" or \"require\")", i);
		else if (n->tls_max_handshakes)
			err_at(c, at(nbd, "tls_max_handshakes"),
			       "exports[%zu].nbd.tls_max_handshakes: applies with tls on or require", i);
		return;
	}
	if (n->listen.kind == GW_LISTEN_NONE) {
		err_at(c, at(nbd, "tls"),
		       "exports[%zu].nbd.tls: the kernel's NBD client (/dev/nbdN) has no TLS; "
		       "tls applies to an nbd.listen socket only", i);
		return;
	}
	if (!!n->tls_psk_file == !!n->tls_certificates) {
		err_at(c, at(nbd, "tls"),
		       "exports[%zu].nbd.tls: give tls_psk_file or tls_certificates (one of them)", i);
		return;
	}
	if (n->tls_verify_peer && !n->tls_certificates) {
		err_at(c, at(nbd, "tls_verify_peer"),
		       "exports[%zu].nbd.tls_verify_peer: applies to tls_certificates only", i);
		return;
	}
	/* The secret halves: private to their owner, as DH-HMAC-CHAP files. */
	if (n->tls_psk_file) {
		cfg_path_fmt(path, "exports[%zu].nbd.tls_psk_file", i);
		if (!cfg_secret_file_private(c, at(nbd, "tls_psk_file"), path, n->tls_psk_file, -1))
			return;
	} else {
		cfg_path_fmt(path, "exports[%zu].nbd.tls_certificates", i);
		snprintf(key, sizeof(key), "%s/server-key.pem", n->tls_certificates);
		if (!cfg_secret_file_private(c, at(nbd, "tls_certificates"), path, key, -1))
			return;
		/* The public halves are opened by OpenSSL, blocking: a FIFO
		 * there would hold reactor 0 at a reload. */
		static const char *const pub[] = { "server-cert.pem", "ca-cert.pem" };
		for (size_t k = 0; k < sizeof(pub) / sizeof(pub[0]); k++) {
			struct stat st;
			snprintf(key, sizeof(key), "%s/%s", n->tls_certificates, pub[k]);
			if (stat(key, &st) == 0 && !S_ISREG(st.st_mode)) {
				err_at(c, at(nbd, "tls_certificates"),
				       "%s: %s is not a regular file; refusing it", path, key);
				return;
			}
		}
	}
	if (nbd_tls_new(&(struct nbd_tls_opts){ .mode = (enum nbd_tls_mode)n->tls,
						 .psk_file = n->tls_psk_file,
						 .cert_dir = n->tls_certificates,
						 .verify_peer = n->tls_verify_peer },
			&t, err, sizeof(err)) < 0) {
		err_at(c, at(nbd, n->tls_psk_file ? "tls_psk_file" : "tls_certificates"),
		       "exports[%zu].nbd: %s", i, err);
		return;
	}
	nbd_tls_free(t);
}

bool cfg_nbd_tls_equal(const struct gw_nbd *a, const struct gw_nbd *b)
{
	return a->tls == b->tls && a->tls_verify_peer == b->tls_verify_peer &&
	       !strcmp(a->tls_psk_file ? a->tls_psk_file : "", b->tls_psk_file ? b->tls_psk_file : "") &&
	       !strcmp(a->tls_certificates ? a->tls_certificates : "",
		       b->tls_certificates ? b->tls_certificates : "");
}
