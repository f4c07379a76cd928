/* The systemd notify protocol (sd_notify(3)), spoken directly: one datagram
 * of "KEY=VALUE" lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a
 * leading '@' means the abstract namespace).  No libsystemd dependency. */
#ifndef GW_NOTIFY_H
#define GW_NOTIFY_H

/* 1 when sent, 0 when $NOTIFY_SOCKET is unset (not under systemd), or
 * -errno. */
int notify_send(const char *state);
/* printf-style convenience: notify_sendf("STATUS=%u exports", n). */
int notify_sendf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
