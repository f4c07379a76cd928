/* tls_alert_busy SOCK MINBYTES: an x509 NBD-over-TLS client that makes the
 * server's handshake fail while the server is still sending its flight.
 * It sends its ClientHello, reads nothing until MINBYTES of the server's
 * flight are waiting in its socket (the server's certificate chain is
 * made far larger than the socket holds: its send is then in flight),
 * sends a record the server cannot open, and only then reads: the whole
 * flight, then what the server said last.  Prints "alert: ..." (OpenSSL's
 * name for the alert it got) or "eof: ..." (the connection was cut without
 * one).  Built by t_nbd_tls_alert.sh with tls_client.c. */
#define _GNU_SOURCE
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "tls_client.h"

/* The handshake's bytes for the server (only the ClientHello is sent). */
static void flush_hello(SSL *s, int fd)
{
	char b[4096];
	int n;

	while ((n = BIO_read(SSL_get_wbio(s), b, sizeof(b))) > 0)
		if (write(fd, b, (size_t)n) != n) {
			perror("write");
			exit(1);
		}
}

static void say_error(const char *what)
{
	unsigned long e = ERR_peek_last_error();
	char buf[256];

	ERR_error_string_n(e, buf, sizeof(buf));
	printf("%s: %s\n", strstr(buf, "alert") ? "alert" : "eof", e ? buf : what);
	exit(strstr(buf, "alert") ? 0 : 1);
}

int main(int argc, char **argv)
{
	static char buf[1 << 16];
	static const unsigned char bad[5 + 32] = { 0x17, 0x03, 0x03, 0x00, 32, 1, 2, 3 };
	bool done = false;

	if (argc != 3)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	long min = atol(argv[2]);
	int fd = tc_starttls_unix(argv[1]);
	SSL_CTX *cc = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_min_proto_version(cc, TLS1_3_VERSION);
	SSL_CTX_set_verify(cc, SSL_VERIFY_NONE, NULL);
	SSL_CTX_set_max_cert_list(cc, 1L << 24); /* the chain is huge on purpose */
	SSL *s = SSL_new(cc);
	SSL_set_bio(s, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
	SSL_set_connect_state(s);
	if (SSL_do_handshake(s) == 1)
		return 1;
	flush_hello(s, fd);

	/* The server's flight piles up unread; polled, not timed. */
	for (int waited = 0;; waited++) {
		int q = 0;
		if (ioctl(fd, FIONREAD, &q) < 0) {
			perror("FIONREAD");
			return 1;
		}
		if (q >= min)
			break;
		if (waited > 6000) {
			printf("only %d bytes of the flight came in 60 s\n", q);
			return 1;
		}
		poll(NULL, 0, 10);
	}
	if (write(fd, bad, sizeof(bad)) != sizeof(bad)) {
		perror("write");
		return 1;
	}
	/* NOREAD=S: a client that stops reading for S seconds, to see what
	 * the server's failed handshake holds meanwhile. */
	if (getenv("NOREAD")) {
		printf("bad record sent; not reading\n");
		fflush(stdout);
		sleep((unsigned)atoi(getenv("NOREAD")));
		return 0;
	}

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			perror("read");
			return 1;
		}
		if (n == 0)
			break;
		BIO_write(SSL_get_rbio(s), buf, (int)n);
		for (;;) {
			int r = done ? SSL_read(s, buf, sizeof(buf)) : SSL_do_handshake(s);
			(void)BIO_reset(SSL_get_wbio(s)); /* our Finished: not sent */
			if (r > 0) {
				done = true;
				continue;
			}
			int e = SSL_get_error(s, r);
			if (e == SSL_ERROR_WANT_READ)
				break;
			say_error(e == SSL_ERROR_ZERO_RETURN ? "close_notify, no alert" : "no error");
		}
	}
	printf("eof: the connection ended %s without an alert\n",
	       done ? "after the server's flight" : "in the server's flight");
	return 1;
}
