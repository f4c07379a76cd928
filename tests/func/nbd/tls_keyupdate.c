/* tls_keyupdate SOCK IDENTITY HEXKEY MB: an authenticated NBD-over-TLS
 * client (PSK, TLS 1.3) that asks for two 1 MiB reads, never reads its
 * socket again, and sends key update requests (each one makes the server's
 * TLS answer) until MB megabytes are sent or the server stops taking them.
 * Prints how many bytes of them it got out.  Built by t_nbd_tls_keyupdate.sh
 * with tls_client.c (libnbd and Python cannot send key updates). */
#define _GNU_SOURCE
#include <endian.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tls_client.h"

int main(int argc, char **argv)
{
	if (argc != 5 || strlen(argv[3]) != 64)
		return 2;
	signal(SIGPIPE, SIG_IGN); /* the server may cut it off: that is fine */
	int fd = tc_starttls_unix(argv[1]);
	SSL_CTX *cc = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_min_proto_version(cc, TLS1_3_VERSION);
	SSL *s = SSL_new(cc);
	tc_use_psk(s, argv[2], argv[3]);
	SSL_set_fd(s, fd);
	if (SSL_connect(s) != 1) {
		ERR_print_errors_fp(stderr);
		return 1;
	}
	static const unsigned char go[10] = { 0, 0, 0, 4, 'd', 'i', 's', 'k', 0, 0 };
	tc_opt(s, 7, go, sizeof(go)); /* NBD_OPT_GO "disk" */
	if (tc_opt_reply(s) != 1)
		return 1;
	for (int i = 0; i < 2; i++) {
		struct __attribute__((packed)) {
			uint32_t magic;
			uint16_t flags, type;
			uint64_t cookie, off;
			uint32_t len;
		} rq = { htobe32(0x25609513), 0, 0, htobe64((uint64_t)i), 0, htobe32(1 << 20) };
		SSL_write(s, &rq, sizeof(rq));
	}
	/* From here the client never reads: the two replies fill the socket. */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	sleep(1); /* the replies are on their way: the server's send is busy */
	size_t sent = 0, want = (size_t)atol(argv[4]) << 20;
	int stuck = 0;
	bool pending = false;
	while (sent < want && stuck < 200) {
		if (!pending && !SSL_key_update(s, SSL_KEY_UPDATE_REQUESTED))
			break;
		pending = true;
		int r = SSL_do_handshake(s);
		if (r == 1) {
			sent += 22; /* one KeyUpdate record on the wire */
			pending = false;
			stuck = 0;
			continue;
		}
		if (SSL_get_error(s, r) != SSL_ERROR_WANT_WRITE)
			break;
		stuck++; /* the server stopped reading: it is not taking more */
		usleep(10000);
	}
	printf("%zu\n", sent);
	return 0;
}
