/* tls_keyupdate SOCK IDENTITY HEXKEY MB: an authenticated NBD-over-TLS
 * client (PSK, TLS 1.3) that asks for two 1 MiB reads, never reads its
 * socket again, and sends key update requests (each one makes the server's
 * TLS answer) until MB megabytes are sent or the server stops taking them.
 * Prints how many bytes of them it got out.  Built by t_nbd_tls_keyupdate.sh
 * (libnbd and Python cannot send key updates). */
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
			perror("read");
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
			ERR_print_errors_fp(stderr);
			exit(1);
		}
		g += (size_t)r;
	}
}

int main(int argc, char **argv)
{
	if (argc != 5 || strlen(argv[3]) != 64)
		return 2;
	signal(SIGPIPE, SIG_IGN); /* the server may cut it off: that is fine */
	ident = argv[2];
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
	struct __attribute__((packed)) {
		uint64_t magic;
		uint32_t opt, len;
	} oh = { htobe64(0x49484156454F5054ULL), htobe32(5), 0 }; /* STARTTLS */
	if (write(fd, &flags, 4) != 4 || write(fd, &oh, sizeof(oh)) != sizeof(oh))
		return 1;
	rd(fd, rep, sizeof(rep));
	SSL_CTX *cc = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_min_proto_version(cc, TLS1_3_VERSION);
	SSL *s = SSL_new(cc);
	SSL_set_psk_use_session_callback(s, use_session);
	SSL_set_fd(s, fd);
	if (SSL_connect(s) != 1) {
		ERR_print_errors_fp(stderr);
		return 1;
	}
	unsigned char go[10] = { 0, 0, 0, 4, 'd', 'i', 's', 'k', 0, 0 }; /* NBD_OPT_GO "disk" */
	oh.opt = htobe32(7);
	oh.len = htobe32(sizeof(go));
	SSL_write(s, &oh, sizeof(oh));
	SSL_write(s, go, sizeof(go));
	for (;;) {
		unsigned char r[20], b[4096];
		ssl_rd(s, r, sizeof(r));
		uint32_t t, l;
		memcpy(&t, r + 12, 4);
		memcpy(&l, r + 16, 4);
		t = be32toh(t);
		l = be32toh(l);
		if (l > sizeof(b))
			return 1;
		if (l)
			ssl_rd(s, b, l);
		if (t == 1) /* NBD_REP_ACK */
			break;
		if (t & 0x80000000u)
			return 1;
	}
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
