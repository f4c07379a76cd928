/* The NBD exports: the server side of the NBD protocol over volumes.
 *
 * Two ways in, one transmission engine:
 *  - an NBD server on a Unix or TCP socket (fixed newstyle handshake, then
 *    transmission), for qemu, libnbd and remote hosts;
 *  - a socket already in transmission phase, handed over by the kernel
 *    device attach (nbd/kdev.c): the kernel's nbd driver sends requests
 *    with no handshake and takes simple replies only.
 * Every connection lives on one reactor, submits its volume I/O there and
 * answers there; replies go out in completion order. */
#ifndef NBD_NBD_H
#define NBD_NBD_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "gateway/base/listen.h"
#include "gateway/base/reactor.h"
#include "gateway/volume/volume.h"

/* One export a server offers.  The caller owns it; it must outlive the
 * server (and every kernel connection) that uses it. */
struct nbd_export {
	const char *name; /* "" is allowed; the first export is the default */
	const char *description; /* optional (NULL) */
	struct volume *vol;
	bool read_only; /* on top of the volume's own VOL_CAP_READ_ONLY */
};

struct nbd_server;

/* NBD over TLS (NBD_OPT_STARTTLS, nbd/tls.c), per listener. */
enum nbd_tls_mode {
	NBD_TLS_OFF, /* STARTTLS is refused (NBD_REP_ERR_UNSUP) */
	NBD_TLS_ON, /* offered, optional */
	NBD_TLS_REQUIRE, /* every option but STARTTLS and ABORT refused before it */
};

struct nbd_tls_opts {
	enum nbd_tls_mode mode;
	const char *psk_file; /* psktool format: IDENTITY:HEXKEY lines */
	const char *cert_dir; /* server-cert.pem, server-key.pem, ca-cert.pem */
	bool verify_peer; /* x509: a client certificate signed by ca-cert.pem */
	/* TLS handshakes in progress at once on the listener; the next
	 * STARTTLS is closed with a log line (a flood of slow handshakes must
	 * not take the reactors from the data path).  0: the default. */
	unsigned max_handshakes;
};

/* No limit of its own by default: max_connections bounds the handshakes,
 * and a small limit would let a few idle clients (each held up to the 30 s
 * handshake deadline) lock every TLS client out. */
#define NBD_TLS_DEFAULT_MAX_HANDSHAKES UINT_MAX

struct nbd_tls;
/* Loads the credentials; *out stays NULL when mode is off.  -errno with
 * the reason (file, line, OpenSSL's words) in err. */
int nbd_tls_new(const struct nbd_tls_opts *o, struct nbd_tls **out, char *err, size_t errlen);
void nbd_tls_free(struct nbd_tls *t);
/* Reads the key files again (same paths): when their content changed, new
 * handshakes use the new keys (*changed); sessions and handshakes under
 * way keep theirs.  On an error the old keys stay.  Not concurrent with
 * itself or nbd_tls_free (the main thread's); handshakes may run. */
int nbd_tls_reload(struct nbd_tls *t, const struct nbd_tls_opts *o, bool *changed, char *err,
		   size_t errlen);
enum nbd_tls_mode nbd_tls_mode(const struct nbd_tls *t);
/* "off", "on", "require"; "?" past the end (the config's enum walk). */
const char *nbd_tls_mode_name(int mode);
/* One line of a PSK file: 0, or -EINVAL with why (the key is not echoed). */
int nbd_tls_psk_parse_line(const char *line, char *id, size_t id_len, uint8_t *key,
			   size_t *key_len, const char **why);

struct nbd_server_opts {
	const struct gw_listen *listen; /* unix:PATH or tcp:HOST:PORT */
	struct nbd_export **exports;
	unsigned nr_exports;
	/* Accepted connections are spread round-robin over these reactors;
	 * the listener runs on reactors[0]. */
	struct reactor **reactors;
	unsigned nr_reactors;
	/* Clients connected at once; the next one is closed at accept with
	 * one log line.  0 = NBD_DEFAULT_MAX_CONNECTIONS. */
	unsigned max_connections;
	/* NULL: no TLS.  Owned by the caller; must outlive the server. */
	const struct nbd_tls *tls;
};

#define NBD_DEFAULT_MAX_CONNECTIONS 64u

/* Binds and listens (a stale Unix socket file is replaced; TCP binds to
 * loopback unless the address says otherwise).  -errno with a logged
 * reason. */
int nbd_server_start(const struct nbd_server_opts *opts, struct nbd_server **out);
/* Closes the listener and every connection; in-flight volume I/O is
 * drained first.  done(arg) runs on reactors[0] when nothing refers to the
 * server any more, then the server is freed. */
void nbd_server_stop(struct nbd_server *s, void (*done)(void *arg), void *arg);

/* A connected socket in transmission phase (the kernel nbd driver's end
 * of a socketpair).  closed(arg, err) runs on r once the connection is
 * gone and its I/O drained (err 0 on an orderly NBD_CMD_DISC). */
struct nbd_conn;
int nbd_conn_start_kernel(struct reactor *r, struct nbd_export *e, int fd,
			  void (*closed)(void *arg, int err), void *arg,
			  struct nbd_conn **out);
/* The kernel device's sockets are one client: their flushes share cursor
 * (vol_loss_sample'd by the caller, who keeps it while c lives), so that
 * a write loss fails one flush of the device, not one per socket. */
void nbd_conn_share_loss_cursor(struct nbd_conn *c, uint64_t *cursor);
/* A connected socket that starts with the fixed newstyle handshake, as
 * the server's accepted connections do (for inetd-style use, tests and the
 * fuzzer).  peer names it in logs.  closed() as above. */
int nbd_conn_start_newstyle(struct reactor *r, struct nbd_export *const *exports,
			    unsigned nr_exports, int fd, const char *peer,
			    void (*closed)(void *arg, int err), void *arg,
			    struct nbd_conn **out);
/* The same with TLS credentials (NULL: none); tls must outlive it. */
int nbd_conn_start_newstyle_tls(struct reactor *r, struct nbd_export *const *exports,
				unsigned nr_exports, const struct nbd_tls *tls, int fd,
				const char *peer, void (*closed)(void *arg, int err), void *arg,
				struct nbd_conn **out);
/* Close a connection started above; closed() still runs once.  In
 * transmission, requests in flight are answered first. */
void nbd_conn_close(struct nbd_conn *c);

/* The transmission flags an export advertises (NBD_FLAG_*), derived from
 * its volume's capabilities.  Exposed for tests and for the kernel attach. */
uint16_t nbd_export_flags(const struct nbd_export *e);

/* For tests and the fuzzer: requests from `bytes` up go through pipes
 * (when the connection can), instead of from NBD_SPLICE_MIN (nbd/internal.h)
 * up; 0 restores that default, UINT32_MAX turns pipes off.  Process-wide;
 * set it between connections. */
void nbd_splice_set_min(uint32_t bytes);

#endif
