/* What the NBD-over-TLS test clients (tls_bye, tls_keyupdate,
 * tls_alert_busy) share: the plaintext start up to the STARTTLS ACK on a
 * unix socket, a TLS 1.3 external PSK as GnuTLS sends it, whole reads,
 * and NBD options inside TLS.  Built with each client (see the
 * t_nbd_tls_*.sh that use them); every failure exits. */
#ifndef NBD_TLS_CLIENT_H
#define NBD_TLS_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/ssl.h>

/* Connects to the NBD server at the unix socket PATH, takes the
 * greeting, sends NBD_OPT_STARTTLS and reads its ACK: the socket is
 * ready for the TLS handshake. */
int tc_starttls_unix(const char *path);
/* The PSK IDENTITY with HEXKEY (64 hex digits) for s's handshake. */
void tc_use_psk(SSL *s, const char *identity, const char *hexkey);
void tc_read(int fd, void *b, size_t n);
void tc_ssl_read(SSL *s, void *b, size_t n);
/* An NBD option (inside TLS), and the type of its final reply (ACK or
 * an error); the replies before it are skipped. */
void tc_opt(SSL *s, uint32_t opt, const void *data, uint32_t len);
uint32_t tc_opt_reply(SSL *s);

#endif
