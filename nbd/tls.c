/* NBD over TLS (NBD_OPT_STARTTLS) with OpenSSL's libssl, on memory BIOs:
 * the connection's own receive op brings ciphertext, which goes into the
 * read BIO; SSL_read hands plaintext to the parser's buffer; replies are
 * sealed by SSL_write into the write BIO, whose bytes the connection's
 * own send op sends.  Nothing here blocks or owns a socket.
 *
 * Credentials are per listener: a PSK file in GnuTLS psktool's format
 * ("identity:hexkey" lines, as nbdkit, qemu and libnbd read it), used as
 * TLS 1.3 external PSKs (identity = user name, SHA-256, as GnuTLS sends
 * them), or an x509 directory laid out as nbdkit and qemu want it
 * (server-cert.pem, server-key.pem, ca-cert.pem for client certificates). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <pthread.h>

#include "gateway/base/invariant.h"
#include "gateway/base/log.h"
#include "nbd/internal.h"

/* Ciphertext received per receive op. */
#define TLS_RX_SIZE (64u * 1024)
#define TLS_PSK_MAX 64 /* bytes of one key */
/* Plaintext sealed per send: bounds the ciphertext held per connection
 * (write BIO and send buffer, outside the buffer budget) whatever the
 * size of the replies. */
#define TLS_SEAL_MAX (256u * 1024)
/* Plaintext of one record (the TLS maximum) and the most a record adds:
 * header, explicit nonce or IV, tag or MAC, padding (22 bytes for TLS 1.3
 * AES-GCM, 85 for TLS 1.2 CBC with SHA-384).  The send buffer is sized
 * by them. */
#define TLS_RECORD_PLAIN (16u * 1024)
#define TLS_RECORD_OVERHEAD 96u
/* What TLS may have to say by itself (answers to the client's key
 * updates) before the connection stops reading: a client that sends key
 * update requests and never reads its socket must not grow the write BIO
 * without bound (it is outside the buffer budget). */
#define TLS_WBIO_MAX (16u * 1024)
/* Reads in a row that brought no application data but made TLS answer
 * (each read takes what one receive brought: many records): a client
 * doing nothing but that is cut off. */
#define TLS_CTL_MAX 1024u
/* What a failing TLS may still say (its alert, with the rest of a flight
 * it had not sent): sent with one non-blocking send before the close. */
#define TLS_LAST_WORDS_MAX 4096u

struct psk_entry {
	char *identity;
	uint8_t key[TLS_PSK_MAX];
	size_t key_len;
};

/* One reading of the key files.  A reload that finds their content
 * changed puts a new one in place; handshakes under way and sessions keep
 * the one they started with (a reference each). */
struct tls_keys {
	SSL_CTX *ctx;
	struct psk_entry *psk;
	unsigned nr_psk;
	unsigned char digest[32]; /* of the files' content */
	unsigned refs; /* atomic */
};

struct nbd_tls {
	enum nbd_tls_mode mode;
	unsigned max_handshakes; /* atomic (a reload may change it) */
	unsigned handshakes; /* atomic: in progress, over all reactors */
	/* Taking a reference to keys (reactors) against replacing it (the
	 * main thread's reload). */
	pthread_mutex_t lock;
	struct tls_keys *keys;
};

struct nbd_tls_conn {
	struct tls_keys *keys; /* a reference */
	SSL *ssl;
	BIO *rbio, *wbio; /* owned by ssl */
	bool ready; /* handshake done */
	bool bye_sealed; /* close_notify is in the ciphertext (orderly end) */
	uint8_t *rxc; /* ciphertext being received */
	uint8_t *txc; /* ciphertext being sent */
	size_t txc_cap;
	unsigned ctl_in_row; /* see TLS_CTL_MAX */
	/* Plaintext of the send batch not sealed yet (slices of txv). */
	struct iovec pv[2 * NBD_TX_BATCH + 1];
	unsigned pv_first, pv_cnt;
	char why[160]; /* what a callback found wrong, for the failure line */
};

static const char *ossl_err(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();

	if (!e)
		return "no OpenSSL error";
	ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

/* ---- credentials ---- */

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = tolower(ch);
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

int nbd_tls_psk_parse_line(const char *line, char *id, size_t id_len, uint8_t *key,
			   size_t *key_len, const char **why)
{
	const char *colon = strchr(line, ':');
	size_t n = 0, il;

	if (!colon || colon == line) {
		*why = "expected IDENTITY:HEXKEY";
		return -EINVAL;
	}
	il = (size_t)(colon - line);
	if (il >= id_len) {
		*why = "identity too long";
		return -EINVAL;
	}
	memcpy(id, line, il);
	id[il] = 0;
	for (const char *p = colon + 1; *p && *p != '\n' && *p != '\r'; p += 2) {
		int hi = hexval((unsigned char)p[0]), lo = p[1] ? hexval((unsigned char)p[1]) : -1;
		if (hi < 0 || lo < 0) {
			*why = "the key is not an even number of hex digits";
			return -EINVAL;
		}
		if (n == TLS_PSK_MAX) {
			*why = "the key is longer than 64 bytes";
			return -EINVAL;
		}
		key[n++] = (uint8_t)(hi << 4 | lo);
	}
	if (n < 16) {
		*why = "the key is shorter than 16 bytes (psktool makes 32)";
		return -EINVAL;
	}
	*key_len = n;
	return 0;
}

/* What is left of a line longer than the buffer: true if there is some. */
static bool line_rest(FILE *f, const char *line, bool drop)
{
	int ch;

	if (strchr(line, '\n'))
		return false;
	ch = getc(f);
	if (ch == EOF)
		return false; /* the last line, without its newline */
	while (drop && ch != '\n' && ch != EOF)
		ch = getc(f);
	if (!drop)
		ungetc(ch, f);
	return true;
}

static int load_psk(struct tls_keys *t, const char *file, char *err, size_t errlen)
{
	FILE *f = fopen(file, "re");
	/* The file's keys pass through these and stdio's buffer (ours, so
	 * that it can be cleansed too). */
	char line[1024], iobuf[4096];
	struct psk_entry e = { 0 };
	unsigned lineno = 0;
	int ret = 0;

	if (!f) {
		snprintf(err, errlen, "%s: %s", file, strerror(errno));
		return -errno;
	}
	setvbuf(f, iobuf, _IOFBF, sizeof(iobuf));
	while (fgets(line, sizeof(line), f)) {
		char id[256];
		const char *why;

		lineno++;
		if (line[0] == '#') {
			line_rest(f, line, true);
			continue;
		}
		if (line[0] == '\n' || line[0] == 0 || (line[0] == '\r' && (line[1] == '\n' || !line[1])))
			continue;
		if (line_rest(f, line, false)) {
			snprintf(err, errlen, "%s:%u: line longer than %zu characters", file, lineno,
				 sizeof(line) - 2);
			ret = -EINVAL;
			break;
		}
		e = (struct psk_entry){ 0 };
		if (nbd_tls_psk_parse_line(line, id, sizeof(id), e.key, &e.key_len, &why) < 0) {
			snprintf(err, errlen, "%s:%u: %s", file, lineno, why);
			ret = -EINVAL;
			break;
		}
		struct psk_entry *np = realloc(t->psk, (t->nr_psk + 1) * sizeof(*np));
		if (!np || !(e.identity = strdup(id))) {
			if (np)
				t->psk = np;
			ret = -ENOMEM;
			snprintf(err, errlen, "out of memory");
			break;
		}
		t->psk = np;
		t->psk[t->nr_psk++] = e;
	}
	fclose(f);
	OPENSSL_cleanse(line, sizeof(line));
	OPENSSL_cleanse(iobuf, sizeof(iobuf));
	OPENSSL_cleanse(&e, sizeof(e));
	if (!ret && !t->nr_psk) {
		snprintf(err, errlen, "%s: no IDENTITY:HEXKEY line", file);
		ret = -EINVAL;
	}
	return ret;
}

static int find_psk(SSL *ssl, const unsigned char *identity, size_t identity_len,
		    SSL_SESSION **sess)
{
	struct nbd_conn *c = SSL_get_app_data(ssl);
	const struct tls_keys *t = c->tls->keys;
	static const unsigned char aes128[] = { 0x13, 0x01 };

	*sess = NULL;
	for (unsigned i = 0; i < t->nr_psk; i++) {
		const struct psk_entry *e = &t->psk[i];
		if (strlen(e->identity) != identity_len || memcmp(e->identity, identity, identity_len))
			continue;
		/* GnuTLS binds external PSKs with SHA-256: a SHA-256 suite. */
		const SSL_CIPHER *ci = SSL_CIPHER_find(ssl, aes128);
		SSL_SESSION *s = SSL_SESSION_new();
		if (!s || !ci || !SSL_SESSION_set1_master_key(s, e->key, e->key_len) ||
		    !SSL_SESSION_set_cipher(s, ci) ||
		    !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
			SSL_SESSION_free(s);
			return 0;
		}
		*sess = s;
		snprintf(c->tls->why, sizeof(c->tls->why), "PSK identity '%.64s'", e->identity);
		return 1;
	}
	/* Not found: the handshake goes on without a PSK, and fails. */
	char id[65];
	log_printable(id, sizeof(id), identity, identity_len);
	snprintf(c->tls->why, sizeof(c->tls->why), "unknown PSK identity '%s'", id);
	return 1;
}

/* Asked for a passphrase: none is given.  Without this callback OpenSSL
 * prompts on the terminal or reads stdin, on the thread reloading the keys
 * (reactor 0), which then waits for someone to type. */
static int no_passphrase(char *buf, int size, int rwflag, void *asked)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	if (asked)
		*(bool *)asked = true;
	return -1;
}

static int load_x509(struct tls_keys *t, const char *dir, bool verify, char *err, size_t errlen)
{
	char path[4096], e[256];
	bool asked = false;
	int ret;

	SSL_CTX_set_default_passwd_cb_userdata(t->ctx, &asked);
	snprintf(path, sizeof(path), "%s/server-cert.pem", dir);
	ret = SSL_CTX_use_certificate_chain_file(t->ctx, path);
	if (ret == 1) {
		snprintf(path, sizeof(path), "%s/server-key.pem", dir);
		ret = SSL_CTX_use_PrivateKey_file(t->ctx, path, SSL_FILETYPE_PEM);
	}
	SSL_CTX_set_default_passwd_cb_userdata(t->ctx, NULL);
	if (ret != 1 && asked) {
		ERR_clear_error();
		snprintf(err, errlen, "%s is encrypted (a passphrase-protected key is not supported)",
			 path);
		return -EINVAL;
	}
	if (ret != 1)
		goto bad;
	if (SSL_CTX_check_private_key(t->ctx) != 1)
		goto bad;
	if (verify) {
		snprintf(path, sizeof(path), "%s/ca-cert.pem", dir);
		if (SSL_CTX_load_verify_locations(t->ctx, path, NULL) != 1)
			goto bad;
		SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	return 0;
bad:
	snprintf(err, errlen, "%s: %s", path, ossl_err(e, sizeof(e)));
	return -EINVAL;
}

/* SHA-256 of a file's bytes, into md. */
static int digest_file(EVP_MD_CTX *md, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	/* Keys pass through both: cleansed after. */
	unsigned char buf[4096];
	char iobuf[4096];
	size_t n;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	setvbuf(f, iobuf, _IOFBF, sizeof(iobuf));
	while ((n = fread(buf, 1, sizeof(buf), f)))
		EVP_DigestUpdate(md, buf, n);
	fclose(f);
	OPENSSL_cleanse(buf, sizeof(buf));
	OPENSSL_cleanse(iobuf, sizeof(iobuf));
	return 0;
}

static int keys_digest(const struct nbd_tls_opts *o, unsigned char out[32], char *err,
		       size_t errlen)
{
	static const char *const x509[] = { "server-cert.pem", "server-key.pem", "ca-cert.pem" };
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	char path[4096];
	int ret = 0;

	if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (o->psk_file) {
		ret = digest_file(md, o->psk_file, err, errlen);
	} else {
		for (unsigned i = 0; i < (o->verify_peer ? 3u : 2u) && !ret; i++) {
			snprintf(path, sizeof(path), "%s/%s", o->cert_dir, x509[i]);
			ret = digest_file(md, path, err, errlen);
		}
	}
	if (!ret)
		EVP_DigestFinal_ex(md, out, NULL);
	EVP_MD_CTX_free(md);
	return ret;
}

static void keys_put(struct tls_keys *k)
{
	if (!k || __atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL))
		return;
	for (unsigned i = 0; i < k->nr_psk; i++) {
		OPENSSL_cleanse(k->psk[i].key, sizeof(k->psk[i].key));
		free(k->psk[i].identity);
	}
	free(k->psk);
	SSL_CTX_free(k->ctx);
	free(k);
}

static struct tls_keys *keys_get(struct nbd_tls *t)
{
	struct tls_keys *k;

	pthread_mutex_lock(&t->lock);
	k = t->keys;
	__atomic_add_fetch(&k->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&t->lock);
	return k;
}

static int keys_new(const struct nbd_tls_opts *o, struct tls_keys **out, char *err, size_t errlen)
{
	struct tls_keys *t;
	int ret;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t || !(t->ctx = SSL_CTX_new(TLS_server_method()))) {
		free(t);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	t->refs = 1;
	/* No session tickets: nothing to resume, nothing sent after the
	 * handshake that the option parser would have to wait for. */
	SSL_CTX_set_num_tickets(t->ctx, 0);
	SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(t->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
					    SSL_OP_NO_TICKET);
	SSL_CTX_set_default_passwd_cb(t->ctx, no_passphrase);
	SSL_CTX_set_min_proto_version(t->ctx, o->psk_file ? TLS1_3_VERSION : TLS1_2_VERSION);
	SSL_CTX_set_ciphersuites(t->ctx, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:"
					 "TLS_AES_256_GCM_SHA384");
	if (o->psk_file) {
		ret = load_psk(t, o->psk_file, err, errlen);
		SSL_CTX_set_psk_find_session_callback(t->ctx, find_psk);
	} else {
		ret = load_x509(t, o->cert_dir, o->verify_peer, err, errlen);
	}
	if (!ret)
		ret = keys_digest(o, t->digest, err, errlen);
	if (ret < 0) {
		keys_put(t);
		return ret;
	}
	*out = t;
	return 0;
}

int nbd_tls_new(const struct nbd_tls_opts *o, struct nbd_tls **out, char *err, size_t errlen)
{
	struct nbd_tls *t;
	int ret;

	*out = NULL;
	if (o->mode == NBD_TLS_OFF)
		return 0;
	if (!!o->psk_file == !!o->cert_dir) {
		snprintf(err, errlen, "TLS needs either a PSK file or a certificate directory");
		return -EINVAL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	t->mode = o->mode;
	t->max_handshakes = o->max_handshakes ? o->max_handshakes : NBD_TLS_DEFAULT_MAX_HANDSHAKES;
	pthread_mutex_init(&t->lock, NULL);
	ret = keys_new(o, &t->keys, err, errlen);
	if (ret < 0) {
		nbd_tls_free(t);
		return ret;
	}
	*out = t;
	return 0;
}

int nbd_tls_reload(struct nbd_tls *t, const struct nbd_tls_opts *o, bool *changed, char *err,
		   size_t errlen)
{
	struct tls_keys *k, *old;
	int ret;

	*changed = false;
	if (!!o->psk_file == !!o->cert_dir) {
		snprintf(err, errlen, "TLS needs either a PSK file or a certificate directory");
		return -EINVAL;
	}
	ret = keys_new(o, &k, err, errlen);
	if (ret < 0)
		return ret;
	__atomic_store_n(&t->max_handshakes,
			 o->max_handshakes ? o->max_handshakes : NBD_TLS_DEFAULT_MAX_HANDSHAKES,
			 __ATOMIC_RELAXED);
	/* Only this (main) thread replaces keys: reading it unlocked is fine. */
	if (!memcmp(k->digest, t->keys->digest, sizeof(k->digest))) {
		keys_put(k);
		return 0;
	}
	pthread_mutex_lock(&t->lock);
	old = t->keys;
	t->keys = k;
	pthread_mutex_unlock(&t->lock);
	keys_put(old);
	*changed = true;
	return 0;
}

void nbd_tls_free(struct nbd_tls *t)
{
	if (!t)
		return;
	/* Every connection gives its slot back before it tells the server it
	 * is gone (nbd_tls_conn_closing), so none can touch t after this. */
	INVARIANT(__atomic_load_n(&t->handshakes, __ATOMIC_RELAXED) == 0,
		  "an NBD TLS listener freed with handshakes still counted");
	keys_put(t->keys);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

const char *nbd_tls_mode_name(int mode)
{
	static const char *const names[] = { "off", "on", "require" };

	return mode >= 0 && mode < 3 ? names[mode] : "?";
}

enum nbd_tls_mode nbd_tls_mode(const struct nbd_tls *t)
{
	return t ? t->mode : NBD_TLS_OFF;
}

/* buf holds at least need bytes, grown to need (rounded to a page), not
 * doubled: it is outside the buffer budget, held by every connection.
 * Its own mapping, so that nbd_tls_idle gives the pages back to the
 * system: freed to malloc's heap they stayed resident. */
static int txc_reserve(uint8_t **buf, size_t *cap, size_t need)
{
	void *nb;

	if (need <= *cap)
		return 0;
	need = (need + 4095) & ~(size_t)4095;
	if (*buf)
		nb = mremap(*buf, *cap, need, MREMAP_MAYMOVE);
	else
		nb = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (nb == MAP_FAILED)
		return -ENOMEM;
	*buf = nb;
	*cap = need;
	return 0;
}

static void txc_release(struct nbd_tls_conn *tc)
{
	if (tc->txc)
		munmap(tc->txc, tc->txc_cap);
	tc->txc = NULL;
	tc->txc_cap = 0;
}

/* ---- a connection ---- */

/* The connection's handshake is over (done, failed or abandoned). */
static void handshake_uncount(struct nbd_conn *c)
{
	if (!c->tls_counted)
		return;
	c->tls_counted = false;
	__atomic_sub_fetch(&((struct nbd_tls *)c->tls_cfg)->handshakes, 1, __ATOMIC_RELAXED);
}

int nbd_tls_slot_take(struct nbd_conn *c)
{
	/* The listener's own count, shared by its reactors: c->tls_cfg is
	 * const to the rest of the server, not to this file. */
	struct nbd_tls *t = (struct nbd_tls *)c->tls_cfg;
	unsigned max = __atomic_load_n(&t->max_handshakes, __ATOMIC_RELAXED);
	unsigned now = __atomic_add_fetch(&t->handshakes, 1, __ATOMIC_RELAXED);

	if (now > max) {
		__atomic_sub_fetch(&t->handshakes, 1, __ATOMIC_RELAXED);
		log_rl(WARN, "nbd %s: STARTTLS refused: %u TLS handshakes already in progress on this "
		       "listener (tls_max_handshakes %u)", c->peer, now - 1, max);
		return -EBUSY;
	}
	c->tls_counted = true;
	return 0;
}

/* Before the connection tells its owner it is gone: after that, reactor 0
 * may free the export and the listener's count with it. */
void nbd_tls_conn_closing(struct nbd_conn *c)
{
	handshake_uncount(c);
}

void nbd_tls_conn_free(struct nbd_conn *c)
{
	struct nbd_tls_conn *tc = c->tls;

	handshake_uncount(c);
	if (!tc)
		return;
	SSL_free(tc->ssl);
	keys_put(tc->keys);
	free(tc->rxc);
	txc_release(tc);
	free(tc);
	c->tls = NULL;
}

/* The send buffer (up to TLS_SEAL_MAX and its records' overhead) is not
 * kept for a quiet connection, nor the BIOs' buffers, which keep the most
 * they ever held (the receive BIO up to a receive and a record): a fresh
 * BIO for an empty one.  Not while a send of txc is in flight. */
void nbd_tls_idle(struct nbd_conn *c)
{
	struct nbd_tls_conn *tc = c->tls;
	BIO *b;

	if (!tc || c->tx_busy)
		return;
	txc_release(tc);
	if (!BIO_ctrl_pending(tc->wbio) && (b = BIO_new(BIO_s_mem()))) {
		SSL_set0_wbio(tc->ssl, b);
		tc->wbio = b;
	}
	if (!BIO_ctrl_pending(tc->rbio) && (b = BIO_new(BIO_s_mem()))) {
		SSL_set0_rbio(tc->ssl, b);
		tc->rbio = b;
	}
}

/* Before a hard close: the alert TLS wrote (why it gives up) goes to the
 * client, or the client sees a bare EOF and cannot say what was wrong.
 * The ring's send would be too late (the close shuts the socket before it
 * runs), so one non-blocking send of at most TLS_LAST_WORDS_MAX here:
 * nothing waits for a client that does not read.  Not while a send of ours
 * is in flight: these bytes must not overtake it. */
static void last_words(struct nbd_conn *c)
{
	struct nbd_tls_conn *tc = c->tls;
	uint8_t buf[TLS_LAST_WORDS_MAX];
	size_t n = BIO_ctrl_pending(tc->wbio);
	ssize_t sent;

	if (!n || c->tx_busy || c->state >= NBD_CONN_CLOSING)
		return;
	if (n > sizeof(buf))
		return; /* more than an alert: not ours to flush now */
	if (BIO_read(tc->wbio, buf, (int)n) != (int)n)
		return;
	sent = send(c->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (sent != (ssize_t)n)
		log_debug("nbd %s: TLS alert not sent whole (%zd of %zu bytes)", c->peer, sent, n);
}

void nbd_tls_bye_now(struct nbd_conn *c)
{
	struct nbd_tls_conn *tc = c->tls;
	char buf[256];

	if (!tc || !tc->ready || tc->bye_sealed)
		return;
	tc->bye_sealed = true;
	ERR_clear_error();
	if (SSL_shutdown(tc->ssl) < 0)
		log_debug("nbd %s: TLS close_notify: %s", c->peer, ossl_err(buf, sizeof(buf)));
	last_words(c);
}

/* A handshake that failed: the alert TLS wrote goes to the client.  If a
 * send of ours is in flight (the flight is large: a certificate chain)
 * or more than an alert is waiting, last_words cannot send it at once:
 * the connection then stops reading, sends what it has, alert last, and
 * closes (the drain timeout bounds a client that does not read). */
static void handshake_fail(struct nbd_conn *c, const char *s)
{
	struct nbd_tls_conn *tc = c->tls;

	/* The handshake is over: its slot is free now, not after the
	 * alert's send (which a client that stops reading can hold). */
	handshake_uncount(c);
	if (c->tx_busy || BIO_ctrl_pending(tc->wbio) > TLS_LAST_WORDS_MAX) {
		nbd_conn_fail_after_send(c, -EPROTO, "TLS handshake failed: %s%s%s", s,
					 tc->why[0] ? "; " : "", tc->why);
		return;
	}
	last_words(c);
	nbd_conn_fail(c, -EPROTO, "TLS handshake failed: %s%s%s", s, tc->why[0] ? "; " : "",
		      tc->why);
}

/* e is SSL_get_error's, taken before anything else touches the
 * thread's error queue. */
static void fail_ssl(struct nbd_conn *c, const char *what, int e)
{
	struct nbd_tls_conn *tc = c->tls;
	char buf[256];
	const char *s = buf;

	if (e == SSL_ERROR_SSL)
		ossl_err(buf, sizeof(buf));
	else if (e == SSL_ERROR_ZERO_RETURN)
		s = "client sent close_notify";
	else
		snprintf(buf, sizeof(buf), "SSL error %d", e);

	last_words(c);
	nbd_conn_fail(c, -EPROTO, "TLS %s failed: %s%s%s", what, s, tc->why[0] ? "; " : "",
		      tc->why);
}

static void tls_recv(struct nbd_conn *c)
{
	if (c->rx_busy || c->state >= NBD_CONN_DRAINING)
		return;
	reactor_recv(c->r, &c->rx_op, c->fd, c->tls->rxc, TLS_RX_SIZE, 0);
	c->rx_busy = true;
}

static void handshake_step(struct nbd_conn *c)
{
	struct nbd_tls_conn *tc = c->tls;
	int ret;

	char ebuf[256];
	int e;

	ERR_clear_error();
	ret = SSL_do_handshake(tc->ssl);
	e = ret == 1 ? SSL_ERROR_NONE : SSL_get_error(tc->ssl, ret);
	if (e == SSL_ERROR_SSL) {
		handshake_fail(c, ossl_err(ebuf, sizeof(ebuf)));
		return;
	}
	/* Whatever the handshake wrote (its flight) goes out. */
	nbd_conn_tx_kick(c);
	if (ret == 1) {
		X509 *peer = SSL_get0_peer_certificate(tc->ssl);
		if (peer) {
			char subj[128];
			X509_NAME_oneline(X509_get_subject_name(peer), subj, sizeof(subj));
			snprintf(tc->why, sizeof(tc->why), "client certificate %s", subj);
		}
		tc->ready = true;
		handshake_uncount(c);
		if (!nbd_conn_set_state(c, NBD_CONN_OPTIONS))
			return;
		log_info("nbd %s: TLS established (%s, %s%s%s)", c->peer,
			 SSL_get_version(tc->ssl), SSL_get_cipher_name(tc->ssl),
			 tc->why[0] ? ", " : "", tc->why);
		tc->why[0] = 0;
		c->want = RX_OPT_HDR;
		nbd_conn_rx_process(c);
		return;
	}
	if (e == SSL_ERROR_WANT_READ) {
		tls_recv(c);
		return;
	}
	fail_ssl(c, "handshake", e);
}

void nbd_tls_begin(struct nbd_conn *c)
{
	struct nbd_tls_conn *tc = calloc(1, sizeof(*tc));
	char buf[256];

	if (!tc || !(tc->rxc = malloc(TLS_RX_SIZE))) {
		free(tc);
		nbd_conn_fail(c, -ENOMEM, "TLS: out of memory");
		return;
	}
	if (!nbd_conn_set_state(c, NBD_CONN_TLS)) {
		free(tc->rxc);
		free(tc);
		return;
	}
	c->tls = tc;
	ERR_clear_error();
	tc->keys = keys_get((struct nbd_tls *)c->tls_cfg);
	tc->ssl = SSL_new(tc->keys->ctx);
	tc->rbio = BIO_new(BIO_s_mem());
	tc->wbio = BIO_new(BIO_s_mem());
	if (!tc->ssl || !tc->rbio || !tc->wbio) {
		BIO_free(tc->rbio);
		BIO_free(tc->wbio);
		nbd_conn_fail(c, -ENOMEM, "TLS: %s", ossl_err(buf, sizeof(buf)));
		return;
	}
	SSL_set_bio(tc->ssl, tc->rbio, tc->wbio);
	SSL_set_app_data(tc->ssl, c);
	SSL_set_accept_state(tc->ssl);
	/* A client that sent its ClientHello without waiting for our ACK:
	 * those bytes are already in the plaintext buffer. */
	if (c->rx_tail > c->rx_head)
		BIO_write(tc->rbio, c->rx + c->rx_head, (int)(c->rx_tail - c->rx_head));
	c->rx_head = c->rx_tail = 0;
	/* Option state from before TLS does not carry over. */
	c->structured = c->extended = false;
	handshake_step(c);
}

void nbd_tls_rx_done(struct nbd_conn *c, size_t n)
{
	struct nbd_tls_conn *tc = c->tls;

	if (BIO_write(tc->rbio, tc->rxc, (int)n) != (int)n) {
		nbd_conn_fail(c, -ENOMEM, "TLS: cannot buffer %zu received bytes", n);
		return;
	}
	if (!tc->ready)
		handshake_step(c);
	else
		nbd_conn_rx_process(c);
}

bool nbd_tls_rx_arm(struct nbd_conn *c)
{
	struct nbd_tls_conn *tc = c->tls;
	size_t room;
	int ret;

	if (c->rx_busy || c->state >= NBD_CONN_DRAINING)
		return false;
	nbd_rx_compact(c);
	/* Its answers not sent yet: read on once they are (the send's end
	 * runs the parser, which comes back here). */
	if (BIO_ctrl_pending(tc->wbio) > TLS_WBIO_MAX) {
		nbd_conn_tx_kick(c);
		return false;
	}
	room = NBD_RXBUF_SIZE - c->rx_tail;
	size_t said = BIO_ctrl_pending(tc->wbio);
	ERR_clear_error();
	ret = SSL_read(tc->ssl, c->rx + c->rx_tail, (int)room);
	if (ret > 0) {
		c->rx_tail += (size_t)ret;
		tc->ctl_in_row = 0;
		return true;
	}
	int e = SSL_get_error(tc->ssl, ret);

	switch (e) {
	case SSL_ERROR_WANT_READ: {
		/* SSL_read may have answered something (a key update). */
		size_t now = BIO_ctrl_pending(tc->wbio);
		if (now > said && ++tc->ctl_in_row > TLS_CTL_MAX) {
			nbd_conn_fail(c, -EPROTO, "TLS: %u reads in a row brought no data and made "
				      "TLS answer (key update requests?)", tc->ctl_in_row);
			return false;
		}
		if (now)
			nbd_conn_tx_kick(c);
		if (now > TLS_WBIO_MAX)
			return false; /* as above: once the answers are sent */
		tls_recv(c);
		return false;
	}
	case SSL_ERROR_ZERO_RETURN:
		/* Its half is closed, ours is not: what is in flight is
		 * answered, then our close_notify (seal_bye) says that the
		 * end was orderly on this side too. */
		nbd_conn_drain(c, -ECONNRESET, "client closed TLS (close_notify)");
		return false;
	default:
		fail_ssl(c, "read", e);
		return false;
	}
}

/* Moves what the write BIO holds to the end of buf (len bytes used). */
static int txc_take(SSL *ssl, uint8_t **buf, size_t *cap, size_t *len)
{
	BIO *wbio = SSL_get_wbio(ssl);
	size_t pending = BIO_ctrl_pending(wbio);

	if (!pending)
		return 0;
	if (txc_reserve(buf, cap, *len + pending))
		return -ENOMEM;
	if (BIO_read(wbio, *buf + *len, (int)pending) != (int)pending)
		return -EIO;
	*len += pending;
	return 0;
}

ssize_t nbd_tls_seal_iov(struct ssl_st *ssl, struct iovec *v, unsigned *first, unsigned cnt,
			 uint8_t **buf, size_t *cap, int *ssl_err)
{
	size_t len = 0, budget = TLS_SEAL_MAX, plain = 0;
	int ret;

	/* Room for all of it at once (one realloc, not one per record). */
	for (unsigned i = *first; i < cnt && plain < budget; i++)
		plain += v[i].iov_len;
	plain = plain < budget ? plain : budget;
	if (txc_reserve(buf, cap, BIO_ctrl_pending(SSL_get_wbio(ssl)) + plain +
				      (plain / TLS_RECORD_PLAIN + 1) * TLS_RECORD_OVERHEAD))
		return -ENOMEM;
	/* What TLS itself has to say goes first. */
	ret = txc_take(ssl, buf, cap, &len);
	if (ret)
		return ret;
	/* A record at a time, each taken out of the write BIO at once: the
	 * BIO's buffer keeps the most it ever held for the connection's
	 * life (sealing TLS_SEAL_MAX at once left ~350 KiB there). */
	ERR_clear_error();
	while (*first < cnt && budget) {
		struct iovec *p = &v[*first];
		size_t n = p->iov_len < budget ? p->iov_len : budget;
		n = n < TLS_RECORD_PLAIN ? n : TLS_RECORD_PLAIN;
		if (n) {
			ret = SSL_write(ssl, p->iov_base, (int)n);
			if (ret <= 0) {
				*ssl_err = SSL_get_error(ssl, ret);
				return -EPROTO;
			}
			ret = txc_take(ssl, buf, cap, &len);
			if (ret)
				return ret;
		}
		p->iov_base = (uint8_t *)p->iov_base + n;
		p->iov_len -= n;
		budget -= n;
		if (!p->iov_len)
			(*first)++;
	}
	return (ssize_t)len;
}

/* Seals up to TLS_SEAL_MAX of what is left in pv, plus what TLS itself
 * has to say, into txc; txv[0] points at it.  1, 0 (nothing), -1. */
static int seal_some(struct nbd_conn *c)
{
	struct nbd_tls_conn *tc = c->tls;
	int e = 0;
	ssize_t n = nbd_tls_seal_iov(tc->ssl, tc->pv, &tc->pv_first, tc->pv_cnt, &tc->txc,
				     &tc->txc_cap, &e);

	if (n == -EPROTO) {
		fail_ssl(c, "write", e);
		return -1;
	}
	if (n < 0) {
		nbd_conn_fail(c, (int)n, "TLS: cannot take the sealed bytes: %s", strerror((int)-n));
		return -1;
	}
	if (!n)
		return 0;
	c->txv[0].iov_base = tc->txc;
	c->txv[0].iov_len = (size_t)n;
	return 1;
}

/* An orderly end (NBD_CMD_DISC, NBD_OPT_ABORT, the client's close_notify,
 * the server stopping: the connection drains) says close_notify once its last reply is sealed, so
 * that the client can tell it from a cut connection.  Nothing is written
 * after it; the client's own close_notify is not waited for (the socket is
 * shut once this is sent). */
static void seal_bye(struct nbd_conn *c)
{
	struct nbd_tls_conn *tc = c->tls;
	char buf[256];

	if (!tc->ready || tc->bye_sealed || c->state != NBD_CONN_DRAINING || c->inflight ||
	    !list_empty(&c->replyq))
		return;
	tc->bye_sealed = true;
	ERR_clear_error();
	if (SSL_shutdown(tc->ssl) < 0)
		log_debug("nbd %s: TLS close_notify: %s", c->peer, ossl_err(buf, sizeof(buf)));
}

int nbd_tls_seal(struct nbd_conn *c, unsigned n)
{
	struct nbd_tls_conn *tc = c->tls;

	memcpy(tc->pv, c->txv, n * sizeof(c->txv[0]));
	tc->pv_first = 0;
	tc->pv_cnt = n;
	if (!n)
		seal_bye(c);
	return seal_some(c);
}

int nbd_tls_seal_more(struct nbd_conn *c)
{
	struct nbd_tls_conn *tc = c->tls;

	if (tc->pv_first == tc->pv_cnt)
		return 0;
	return seal_some(c);
}
