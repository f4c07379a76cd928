/* NBD over TLS credentials (nbd/tls.c): the psktool line format, the
 * errors of loading a PSK file or an x509 directory (file and line, or
 * path and OpenSSL's reason), and the mode names the configuration uses.
 * The protocol itself is tested against libnbd and qemu (t_nbd_tls_*). */
#include "gateway/config.h"
#include "gateway/config_diff.h"
#include "nbd/internal.h"
#include "nbd/nbd.h"

#include <check.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char K32[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

START_TEST(psk_line)
{
	char id[64], line[256];
	uint8_t key[64];
	size_t len = 0;
	const char *why = NULL;

	snprintf(line, sizeof(line), "alice:%s\n", K32);
	ck_assert_int_eq(nbd_tls_psk_parse_line(line, id, sizeof(id), key, &len, &why), 0);
	ck_assert_str_eq(id, "alice");
	ck_assert_uint_eq(len, 32);
	ck_assert_uint_eq(key[0], 0);
	ck_assert_uint_eq(key[31], 0x1f);
	snprintf(line, sizeof(line), "bob:%.31s\n", K32);
	ck_assert_int_eq(nbd_tls_psk_parse_line(line, id, sizeof(id), key, &len, &why), -EINVAL);
	ck_assert_str_eq(why, "the key is not an even number of hex digits");
	ck_assert_int_eq(nbd_tls_psk_parse_line("bob:0011\n", id, sizeof(id), key, &len, &why),
			 -EINVAL);
	ck_assert_str_eq(why, "the key is shorter than 16 bytes (psktool makes 32)");
	snprintf(line, sizeof(line), "bob:%s%s00\n", K32, K32);
	ck_assert_int_eq(nbd_tls_psk_parse_line(line, id, sizeof(id), key, &len, &why), -EINVAL);
	ck_assert_str_eq(why, "the key is longer than 64 bytes");
	ck_assert_int_eq(nbd_tls_psk_parse_line(K32, id, sizeof(id), key, &len, &why), -EINVAL);
	ck_assert_str_eq(why, "expected IDENTITY:HEXKEY");
	ck_assert_int_eq(nbd_tls_psk_parse_line(":00", id, sizeof(id), key, &len, &why), -EINVAL);
	snprintf(line, sizeof(line), "x:%.30sZZ\n", K32);
	ck_assert_int_eq(nbd_tls_psk_parse_line(line, id, sizeof(id), key, &len, &why), -EINVAL);
}
END_TEST

static char dir[] = "/tmp/test_nbd_tls.XXXXXX";

static void write_in(const char *d, const char *name, const char *text)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", d, name);
	f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void write_file(const char *name, const char *text)
{
	write_in(dir, name, text);
}

START_TEST(psk_file_errors)
{
	struct nbd_tls *t = (struct nbd_tls *)1;
	char err[512], p[256], text[256];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(text, sizeof(text), "# comment\n\nalice:%s\nbob:12\n", K32);
	write_file("bad.psk", text);
	snprintf(p, sizeof(p), "%s/bad.psk", dir);
	struct nbd_tls_opts o = { .mode = NBD_TLS_REQUIRE, .psk_file = p };
	ck_assert_int_eq(nbd_tls_new(&o, &t, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_null(t);
	ck_assert_ptr_nonnull(strstr(err, "bad.psk:4: the key is shorter"));

	write_file("empty.psk", "# nothing\n");
	snprintf(p, sizeof(p), "%s/empty.psk", dir);
	ck_assert_int_eq(nbd_tls_new(&o, &t, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "no IDENTITY:HEXKEY line"));

	snprintf(text, sizeof(text), "alice:%s\nbob:%s\n", K32, K32);
	write_file("good.psk", text);
	snprintf(p, sizeof(p), "%s/good.psk", dir);
	ck_assert_int_eq(nbd_tls_new(&o, &t, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(nbd_tls_mode(t), NBD_TLS_REQUIRE);
	nbd_tls_free(t);

	/* Both kinds of credentials, or none: refused. */
	o.cert_dir = dir;
	ck_assert_int_eq(nbd_tls_new(&o, &t, err, sizeof(err)), -EINVAL);
	o.cert_dir = o.psk_file = NULL;
	ck_assert_int_eq(nbd_tls_new(&o, &t, err, sizeof(err)), -EINVAL);
	/* Off: nothing to load. */
	o.mode = NBD_TLS_OFF;
	ck_assert_int_eq(nbd_tls_new(&o, &t, err, sizeof(err)), 0);
	ck_assert_ptr_null(t);
	ck_assert_int_eq(nbd_tls_mode(NULL), NBD_TLS_OFF);
	snprintf(p, sizeof(p), "rm -rf %s", dir);
	ck_assert_int_eq(system(p), 0);
}
END_TEST

/* Files written on Windows (CRLF) have blank lines of "\r\n": skipped as
 * "\n" is.  A comment longer than the line buffer is one line: the error
 * after it names the right line.  Both used to fail at line 2 ("expected
 * IDENTITY:HEXKEY": the CR, the comment's tail). */
START_TEST(psk_file_crlf_long_comment)
{
	struct nbd_tls *t = NULL;
	char tdir[] = "/tmp/test_nbd_tls_psk.XXXXXX";
	char err[512], p[256], text[4096];
	int n;

	ck_assert_ptr_nonnull(mkdtemp(tdir));
	snprintf(p, sizeof(p), "%s/crlf.psk", tdir);
	snprintf(text, sizeof(text), "# keys\r\n\r\nalice:%s\r\n\r\n", K32);
	write_in(tdir, "crlf.psk", text);
	struct nbd_tls_opts o = { .mode = NBD_TLS_REQUIRE, .psk_file = p };
	ck_assert_msg(nbd_tls_new(&o, &t, err, sizeof(err)) == 0, "%s", err);
	nbd_tls_free(t);

	n = snprintf(text, sizeof(text), "# ");
	memset(text + n, 'c', 1500);
	snprintf(text + n + 1500, sizeof(text) - n - 1500, "\nalice:%s\nbob:12\n", K32);
	write_in(tdir, "long.psk", text);
	snprintf(p, sizeof(p), "%s/long.psk", tdir);
	ck_assert_int_eq(nbd_tls_new(&o, &t, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "long.psk:3: the key is shorter"), "%s", err);

	/* A key line that long is an error of its own line. */
	n = snprintf(text, sizeof(text), "alice:%s\nbob:", K32);
	memset(text + n, '0', 1500);
	snprintf(text + n + 1500, sizeof(text) - n - 1500, "\n");
	write_in(tdir, "longkey.psk", text);
	snprintf(p, sizeof(p), "%s/longkey.psk", tdir);
	ck_assert_int_eq(nbd_tls_new(&o, &t, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "longkey.psk:2: "), "%s", err);
	snprintf(p, sizeof(p), "rm -rf %s", tdir);
	ck_assert_int_eq(system(p), 0);
}
END_TEST

START_TEST(x509_missing)
{
	struct nbd_tls *t;
	char err[512];
	struct nbd_tls_opts o = { .mode = NBD_TLS_ON, .cert_dir = "/nonexistent-nbd-tls" };

	ck_assert_int_eq(nbd_tls_new(&o, &t, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent-nbd-tls/server-cert.pem: "));
}
END_TEST

START_TEST(mode_names)
{
	ck_assert_str_eq(nbd_tls_mode_name(NBD_TLS_OFF), "off");
	ck_assert_str_eq(nbd_tls_mode_name(NBD_TLS_ON), "on");
	ck_assert_str_eq(nbd_tls_mode_name(NBD_TLS_REQUIRE), "require");
	ck_assert_str_eq(nbd_tls_mode_name(3), "?");
	ck_assert_str_eq(nbd_tls_mode_name(-1), "?");
}
END_TEST

/* A reload that changes an export's TLS keys restarts the export. */
START_TEST(reload_sees_tls_change)
{
	struct gw_export a = { .name = "e", .nbd = { .tls = NBD_TLS_ON, .tls_psk_file = "/k" } };
	struct gw_export b = a;

	ck_assert(config_export_equal(&a, &b));
	b.nbd.tls = NBD_TLS_REQUIRE;
	ck_assert(!config_export_equal(&a, &b));
	b = a;
	b.nbd.tls_psk_file = "/k2";
	ck_assert(!config_export_equal(&a, &b));
	b = a;
	b.nbd.tls_psk_file = NULL;
	b.nbd.tls_certificates = "/k";
	ck_assert(!config_export_equal(&a, &b));
	b = a;
	b.nbd.tls_verify_peer = true;
	ck_assert(!config_export_equal(&a, &b));
}
END_TEST

/* Same path, new content: the reload takes the new keys (changed), the
 * same content is left alone, and a file that does not load is an error
 * with its file and line (the keys in use stay: the next reload of the
 * good content finds nothing changed). */
START_TEST(reload_by_content)
{
	char tdir[] = "/tmp/test_nbd_tls_reload.XXXXXX";
	char p[256], err[512], cmd[300];
	struct nbd_tls *t;
	bool changed = true;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(tdir));
	snprintf(p, sizeof(p), "%s/keys.psk", tdir);
	f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "alice:%s\n", K32);
	fclose(f);
	struct nbd_tls_opts o = { .mode = NBD_TLS_REQUIRE, .psk_file = p };
	ck_assert_int_eq(nbd_tls_new(&o, &t, err, sizeof(err)), 0);

	ck_assert_int_eq(nbd_tls_reload(t, &o, &changed, err, sizeof(err)), 0);
	ck_assert(!changed);

	f = fopen(p, "w");
	fprintf(f, "alice:%.62s77\n", K32);
	fclose(f);
	ck_assert_int_eq(nbd_tls_reload(t, &o, &changed, err, sizeof(err)), 0);
	ck_assert(changed);
	ck_assert_int_eq(nbd_tls_reload(t, &o, &changed, err, sizeof(err)), 0);
	ck_assert(!changed);

	f = fopen(p, "w");
	fprintf(f, "# keys\nalice:zz\n");
	fclose(f);
	changed = true;
	ck_assert_int_eq(nbd_tls_reload(t, &o, &changed, err, sizeof(err)), -EINVAL);
	ck_assert(!changed);
	ck_assert_ptr_nonnull(strstr(err, "keys.psk:2: the key is not an even number"));

	f = fopen(p, "w");
	fprintf(f, "alice:%.62s77\n", K32);
	fclose(f);
	ck_assert_int_eq(nbd_tls_reload(t, &o, &changed, err, sizeof(err)), 0);
	ck_assert(!changed);
	nbd_tls_free(t);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tdir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A fresh self-signed server certificate and key in d; the key
 * encrypted with pass if not NULL. */
static void make_x509_pass(const char *d, const char *pass)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	char p[256];
	FILE *f;

	ck_assert_ptr_nonnull(k);
	ck_assert_ptr_nonnull(x);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, k);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
				   (const unsigned char *)"test", -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(x));
	ck_assert_int_gt(X509_sign(x, k, EVP_sha256()), 0);
	snprintf(p, sizeof(p), "%s/server-cert.pem", d);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	PEM_write_X509(f, x);
	fclose(f);
	snprintf(p, sizeof(p), "%s/server-key.pem", d);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	if (pass)
		ck_assert_int_eq(PEM_write_PrivateKey(f, k, EVP_aes_128_cbc(), NULL, 0, NULL,
						      (void *)pass), 1);
	else
		PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
	fclose(f);
	X509_free(x);
	EVP_PKEY_free(k);
}

static void make_x509(const char *d)
{
	make_x509_pass(d, NULL);
}

/* x509: a new certificate and key in the same directory are re-read. */
START_TEST(reload_x509_by_content)
{
	char tdir[] = "/tmp/test_nbd_tls_x509.XXXXXX";
	char err[512], cmd[300];
	struct nbd_tls *t;
	bool changed = true;

	ck_assert_ptr_nonnull(mkdtemp(tdir));
	make_x509(tdir);
	struct nbd_tls_opts o = { .mode = NBD_TLS_ON, .cert_dir = tdir };
	ck_assert_int_eq(nbd_tls_new(&o, &t, err, sizeof(err)), 0);
	ck_assert_int_eq(nbd_tls_reload(t, &o, &changed, err, sizeof(err)), 0);
	ck_assert(!changed);
	make_x509(tdir);
	ck_assert_int_eq(nbd_tls_reload(t, &o, &changed, err, sizeof(err)), 0);
	ck_assert(changed);
	ck_assert_int_eq(nbd_tls_reload(t, &o, &changed, err, sizeof(err)), 0);
	ck_assert(!changed);
	/* A key that does not match the certificate: refused, the old stay. */
	snprintf(cmd, sizeof(cmd), "cp %s/server-key.pem %s/k.pem", tdir, tdir);
	ck_assert_int_eq(system(cmd), 0);
	make_x509(tdir);
	snprintf(cmd, sizeof(cmd), "mv %s/k.pem %s/server-key.pem", tdir, tdir);
	ck_assert_int_eq(system(cmd), 0);
	changed = true;
	ck_assert_int_eq(nbd_tls_reload(t, &o, &changed, err, sizeof(err)), -EINVAL);
	ck_assert(!changed);
	ck_assert_ptr_nonnull(strstr(err, "server-key.pem: "));
	nbd_tls_free(t);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tdir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A passphrase-protected server-key.pem: refused at once, naming the file,
 * without OpenSSL asking for the passphrase (the load runs on reactor 0 at
 * a reload: a prompt there stalls it).  With no controlling terminal, the
 * old code read the passphrase from stdin: here a pipe that never ends, so
 * it hung until Check's timeout (OpenSSL's prompt catches SIGALRM). */
START_TEST(x509_encrypted_key)
{
	char tdir[] = "/tmp/test_nbd_tls_enc.XXXXXX";
	char err[512], cmd[300];
	struct nbd_tls *t = (struct nbd_tls *)1;
	int p[2];

	ck_assert_ptr_nonnull(mkdtemp(tdir));
	make_x509_pass(tdir, "x");
	setsid(); /* no /dev/tty for OpenSSL's prompt to open */
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(dup2(p[0], STDIN_FILENO), STDIN_FILENO);
	struct nbd_tls_opts o = { .mode = NBD_TLS_ON, .cert_dir = tdir };
	ck_assert_int_eq(nbd_tls_new(&o, &t, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_null(t);
	ck_assert_msg(strstr(err, "/server-key.pem is encrypted (a passphrase-protected key is "
				  "not supported)"), "%s", err);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tdir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Moves what a's write BIO holds into b's read BIO. */
static void pump(SSL *a, SSL *b)
{
	char buf[16384];
	int n;

	while ((n = BIO_read(SSL_get_wbio(a), buf, sizeof(buf))) > 0)
		ck_assert_int_eq(BIO_write(SSL_get_rbio(b), buf, n), n);
}

/* A large reply batch is sealed into a send buffer of TLS_SEAL_MAX
 * (256 KiB) and its records' overhead, and the write BIO never holds
 * more than a record or so: both are outside the buffer budget, kept per
 * connection.  Sealing 256 KiB at once into a buffer that doubled made
 * them 512 KiB and ~350 KiB.  The ciphertext opens to the plaintext. */
START_TEST(seal_buffer_bounded)
{
	char tdir[] = "/tmp/test_nbd_tls_seal.XXXXXX";
	char p[300];
	size_t total = 1u << 20, got = 0, cap = 0;
	uint8_t *plain = malloc(total), *back = malloc(total), *buf = NULL;
	SSL_CTX *sc = SSL_CTX_new(TLS_server_method()), *cc = SSL_CTX_new(TLS_client_method());
	SSL *s, *c;
	unsigned first = 0, seals = 0;
	int e = 0;

	ck_assert_ptr_nonnull(mkdtemp(tdir));
	make_x509(tdir);
	snprintf(p, sizeof(p), "%s/server-cert.pem", tdir);
	ck_assert_int_eq(SSL_CTX_use_certificate_file(sc, p, SSL_FILETYPE_PEM), 1);
	snprintf(p, sizeof(p), "%s/server-key.pem", tdir);
	ck_assert_int_eq(SSL_CTX_use_PrivateKey_file(sc, p, SSL_FILETYPE_PEM), 1);
	s = SSL_new(sc);
	c = SSL_new(cc);
	SSL_set_bio(s, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
	SSL_set_bio(c, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
	SSL_set_accept_state(s);
	SSL_set_connect_state(c);
	for (int i = 0; i < 10 && !(SSL_is_init_finished(s) && SSL_is_init_finished(c)); i++) {
		SSL_do_handshake(c);
		pump(c, s);
		SSL_do_handshake(s);
		pump(s, c);
	}
	ck_assert(SSL_is_init_finished(s) && SSL_is_init_finished(c));

	for (size_t i = 0; i < total; i++)
		plain[i] = (uint8_t)(i * 7 + i / 251);
	struct iovec v[2] = { { plain, 4096 }, { plain + 4096, total - 4096 } };
	while (first < 2) {
		ssize_t n = nbd_tls_seal_iov(s, v, &first, 2, &buf, &cap, &e);
		BUF_MEM *bm;

		ck_assert_int_gt(n, 0);
		seals++;
		ck_assert_msg(cap <= (256u + 8) * 1024, "send buffer of %zu bytes", cap);
		BIO_get_mem_ptr(SSL_get_wbio(s), &bm);
		ck_assert_msg(bm->max <= 64u * 1024, "write BIO of %zu bytes", bm->max);
		ck_assert_int_eq(BIO_write(SSL_get_rbio(c), buf, (int)n), (int)n);
		int r;
		while (got < total && (r = SSL_read(c, back + got, (int)(total - got))) > 0)
			got += (size_t)r;
	}
	ck_assert_uint_eq(seals, 4);
	ck_assert_uint_eq(got, total);
	ck_assert(!memcmp(plain, back, total));
	/* Nothing left: nothing sealed. */
	ck_assert_int_eq(nbd_tls_seal_iov(s, v, &first, 2, &buf, &cap, &e), 0);

	munmap(buf, cap);
	SSL_free(s);
	SSL_free(c);
	SSL_CTX_free(sc);
	SSL_CTX_free(cc);
	free(plain);
	free(back);
	snprintf(p, sizeof(p), "rm -rf %s", tdir);
	ck_assert_int_eq(system(p), 0);
}
END_TEST

/* tls_max_handshakes is applied in place by a reload, not a restart. */
START_TEST(max_handshakes_no_restart)
{
	struct gw_export a = { .name = "e", .nbd = { .tls = NBD_TLS_ON, .tls_psk_file = "/k" } };
	struct gw_export b = a;

	b.nbd.tls_max_handshakes = 4;
	ck_assert(config_export_equal(&a, &b));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("nbd_tls");
	TCase *tc = tcase_create("credentials");

	tcase_add_test(tc, psk_line);
	tcase_add_test(tc, psk_file_errors);
	tcase_add_test(tc, psk_file_crlf_long_comment);
	tcase_add_test(tc, x509_missing);
	tcase_add_test(tc, mode_names);
	tcase_add_test(tc, reload_sees_tls_change);
	tcase_add_test(tc, reload_by_content);
	tcase_add_test(tc, reload_x509_by_content);
	tcase_add_test(tc, x509_encrypted_key);
	tcase_add_test(tc, seal_buffer_bounded);
	tcase_add_test(tc, max_handshakes_no_restart);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
