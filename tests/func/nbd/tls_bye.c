/* tls_bye SOCK IDENTITY HEXKEY MODE: an NBD-over-TLS client (PSK, TLS
 * 1.3) that tells how the server ended the connection.
 *   disc   NBD_OPT_GO, then NBD_CMD_DISC
 *   abort  NBD_OPT_ABORT after the handshake
 *   wait   NBD_OPT_GO, prints "ready", then waits for the server to end
 *   owait  as wait, but stays in option haggling (no NBD_OPT_GO)
 *   cbye   NBD_OPT_GO, then the client's own close_notify (no NBD_CMD_DISC)
 * Then it reads until the end and prints "close_notify" (the server said
 * TLS's orderly goodbye) or "eof" (the connection was cut without it).
 * For a wrong key (any mode), prints the handshake's error instead, which
 * names the alert the server sent, if it sent one.  Built by the
 * t_nbd_tls_* tests with tls_client.c (libnbd does not tell a close_notify
 * from an EOF). */
#define _GNU_SOURCE
#include <endian.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tls_client.h"

int main(int argc, char **argv)
{
	if (argc != 5 || strlen(argv[3]) != 64)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *mode = argv[4];
	int fd = tc_starttls_unix(argv[1]);
	SSL_CTX *cc = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_min_proto_version(cc, TLS1_3_VERSION);
	SSL *s = SSL_new(cc);
	tc_use_psk(s, argv[2], argv[3]);
	SSL_set_fd(s, fd);
	if (SSL_connect(s) != 1) {
		unsigned long e = ERR_peek_last_error();
		char buf[256];
		ERR_error_string_n(e, buf, sizeof(buf));
		printf("handshake failed: %s\n", e ? buf : "no error (EOF)");
		return 1;
	}
	if (!strcmp(mode, "owait")) {
		printf("ready\n");
	} else if (!strcmp(mode, "abort")) {
		tc_opt(s, 2, NULL, 0); /* NBD_OPT_ABORT */
		if (tc_opt_reply(s) != 1)
			return 1;
	} else {
		static const unsigned char go[10] = { 0, 0, 0, 4, 'd', 'i', 's', 'k', 0, 0 };
		tc_opt(s, 7, go, sizeof(go)); /* NBD_OPT_GO "disk" */
		if (tc_opt_reply(s) != 1)
			return 1;
		if (!strcmp(mode, "cbye")) {
			/* Our half closed; the server's answer is read below. */
			if (SSL_shutdown(s) < 0) {
				printf("close_notify not sent\n");
				return 1;
			}
		} else if (!strcmp(mode, "disc")) {
			struct __attribute__((packed)) {
				uint32_t magic;
				uint16_t flags, type;
				uint64_t cookie, off;
				uint32_t len;
			} rq = { htobe32(0x25609513), 0, htobe16(2), 0, 0, 0 }; /* NBD_CMD_DISC */
			SSL_write(s, &rq, sizeof(rq));
		} else {
			printf("ready\n");
		}
	}
	char b[64];
	int r = SSL_read(s, b, sizeof(b));
	int e = SSL_get_error(s, r);
	if (r <= 0 && e == SSL_ERROR_ZERO_RETURN) {
		printf("close_notify\n");
		return 0;
	}
	printf("eof (SSL_read %d, error %d)\n", r, e);
	return 1;
}
