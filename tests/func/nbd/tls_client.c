/* See tls_client.h. */
#define _GNU_SOURCE
#include <endian.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tls_client.h"

static unsigned char psk_key[32];
static const char *psk_ident;

struct __attribute__((packed)) opt_hdr {
	uint64_t magic;
	uint32_t opt, len;
};

void tc_read(int fd, void *b, size_t n)
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

void tc_ssl_read(SSL *s, void *b, size_t n)
{
	for (size_t g = 0; g < n;) {
		int r = SSL_read(s, (char *)b + g, (int)(n - g));
		if (r <= 0) {
			printf("TLS read failed\n");
			ERR_print_errors_fp(stderr);
			exit(1);
		}
		g += (size_t)r;
	}
}

int tc_starttls_unix(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	unsigned char greet[18], rep[20];
	uint32_t flags = htobe32(3), type; /* fixed newstyle, no zeroes */
	struct opt_hdr oh = { htobe64(0x49484156454F5054ULL), htobe32(5), 0 }; /* STARTTLS */
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (void *)&a, sizeof(a))) {
		perror("connect");
		exit(1);
	}
	tc_read(fd, greet, sizeof(greet));
	if (write(fd, &flags, 4) != 4 || write(fd, &oh, sizeof(oh)) != sizeof(oh)) {
		perror("write");
		exit(1);
	}
	tc_read(fd, rep, sizeof(rep));
	memcpy(&type, rep + 12, 4);
	if (be32toh(type) != 1) {
		printf("STARTTLS refused (reply 0x%08x)\n", be32toh(type));
		exit(1);
	}
	return fd;
}

static int use_session(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
		       SSL_SESSION **sess)
{
	static const unsigned char aes128[] = { 0x13, 0x01 };
	SSL_SESSION *s = SSL_SESSION_new();

	(void)md;
	SSL_SESSION_set1_master_key(s, psk_key, sizeof(psk_key));
	SSL_SESSION_set_cipher(s, SSL_CIPHER_find(ssl, aes128));
	SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION);
	*sess = s;
	*id = (const unsigned char *)psk_ident;
	*idlen = strlen(psk_ident);
	return 1;
}

void tc_use_psk(SSL *s, const char *identity, const char *hexkey)
{
	if (strlen(hexkey) != 64)
		exit(2);
	for (int i = 0; i < 32; i++)
		sscanf(hexkey + 2 * i, "%2hhx", &psk_key[i]);
	psk_ident = identity;
	SSL_set_psk_use_session_callback(s, use_session);
}

void tc_opt(SSL *s, uint32_t opt, const void *data, uint32_t len)
{
	struct opt_hdr oh = { htobe64(0x49484156454F5054ULL), htobe32(opt), htobe32(len) };

	SSL_write(s, &oh, sizeof(oh));
	if (len)
		SSL_write(s, data, (int)len);
}

uint32_t tc_opt_reply(SSL *s)
{
	for (;;) {
		unsigned char r[20], b[4096];
		uint32_t t, l;

		tc_ssl_read(s, r, sizeof(r));
		memcpy(&t, r + 12, 4);
		memcpy(&l, r + 16, 4);
		t = be32toh(t);
		l = be32toh(l);
		if (l > sizeof(b))
			exit(1);
		if (l)
			tc_ssl_read(s, b, l);
		if (t == 1 || (t & 0x80000000u))
			return t;
	}
}
