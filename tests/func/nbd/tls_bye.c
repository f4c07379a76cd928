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
 * t_nbd_tls_* tests (libnbd does not tell a close_notify from an EOF). */
#define _GNU_SOURCE
#include <endian.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static unsigned char key[32];
static const char *ident;

static int use_session(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
		       SSL_SESSION **sess)
{
	static const unsigned char aes128[] = { 0x13, 0x01 };
	SSL_SESSION *s = SSL_SESSION_new();

	(void)md;
	SSL_SESSION_set1_master_key(s, key, sizeof(key));
	SSL_SESSION_set_cipher(s, SSL_CIPHER_find(ssl, aes128));
	SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION);
	*sess = s;
	*id = (const unsigned char *)ident;
	*idlen = strlen(ident);
	return 1;
}

static void rd(int fd, void *b, size_t n)
{
	for (size_t g = 0; g < n;) {
		ssize_t r = read(fd, (char *)b + g, n - g);
		if (r <= 0) {
			printf("plain read failed\n");
			exit(1);
		}
		g += (size_t)r;
	}
}

static void ssl_rd(SSL *s, void *b, size_t n)
{
	for (size_t g = 0; g < n;) {
		int r = SSL_read(s, (char *)b + g, (int)(n - g));
		if (r <= 0) {
			printf("TLS read failed\n");
			exit(1);
		}
		g += (size_t)r;
	}
}

struct __attribute__((packed)) opt_hdr {
	uint64_t magic;
	uint32_t opt, len;
};

/* Option replies until the final one (ACK or an error). */
static uint32_t opt_reply(SSL *s)
{
	for (;;) {
		unsigned char r[20], b[4096];
		uint32_t t, l;

		ssl_rd(s, r, sizeof(r));
		memcpy(&t, r + 12, 4);
		memcpy(&l, r + 16, 4);
		t = be32toh(t);
		l = be32toh(l);
		if (l > sizeof(b))
			exit(1);
		if (l)
			ssl_rd(s, b, l);
		if (t == 1 || (t & 0x80000000u))
			return t;
	}
}

int main(int argc, char **argv)
{
	if (argc != 5 || strlen(argv[3]) != 64)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ident = argv[2];
	const char *mode = argv[4];
	for (int i = 0; i < 32; i++)
		sscanf(argv[3] + 2 * i, "%2hhx", &key[i]);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", argv[1]);
	if (connect(fd, (void *)&a, sizeof(a))) {
		perror("connect");
		return 1;
	}
	unsigned char greet[18], rep[20];
	rd(fd, greet, sizeof(greet));
	uint32_t flags = htobe32(3); /* fixed newstyle, no zeroes */
	struct opt_hdr oh = { htobe64(0x49484156454F5054ULL), htobe32(5), 0 }; /* STARTTLS */
	if (write(fd, &flags, 4) != 4 || write(fd, &oh, sizeof(oh)) != sizeof(oh))
		return 1;
	rd(fd, rep, sizeof(rep));
	SSL_CTX *cc = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_min_proto_version(cc, TLS1_3_VERSION);
	SSL *s = SSL_new(cc);
	SSL_set_psk_use_session_callback(s, use_session);
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
		oh.opt = htobe32(2); /* NBD_OPT_ABORT */
		SSL_write(s, &oh, sizeof(oh));
		if (opt_reply(s) != 1)
			return 1;
	} else {
		unsigned char go[10] = { 0, 0, 0, 4, 'd', 'i', 's', 'k', 0, 0 }; /* GO "disk" */
		oh.opt = htobe32(7);
		oh.len = htobe32(sizeof(go));
		SSL_write(s, &oh, sizeof(oh));
		SSL_write(s, go, sizeof(go));
		if (opt_reply(s) != 1)
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
