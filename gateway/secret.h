/* Where the command-line tools' DH-HMAC-CHAP secrets come from, and how
 * little of them is left where others can read: a private file, the
 * environment, or (warned about, then scrubbed) the command line. */
#ifndef GW_SECRET_H
#define GW_SECRET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#define GW_SECRET_ENV "NVMF_GATEWAY_DHCHAP_SECRET"
#define GW_SECRET_CTRL_ENV "NVMF_GATEWAY_DHCHAP_CTRL_SECRET"

/* NULL when st (a file holding a secret) is private: no bits for group or
 * others, owned by root or by this process's effective uid (another
 * user's file could be rewritten by that user at any time).  Else what is
 * wrong, for a message, in buf. */
const char *gw_secret_file_problem(const struct stat *st, char *buf, size_t len);

/* FILE's first line (trailing space trimmed) into buf: 0, or -errno with
 * *why set for a message (the content is never quoted). */
int gw_secret_read_file(const char *file, char *buf, size_t len, char *why, size_t wlen);
/* As gw_secret_read_file, for a file a configuration names: a regular
 * file only (-EINVAL), and a FIFO is not waited on.  The configuration is
 * loaded again at a reload, on reactor 0, where a read that blocks stops
 * every export that reactor serves; the command-line options keep taking
 * a pipe (--dhchap-secret-file <(...)). */
int gw_secret_read_conf_file(const char *file, char *buf, size_t len, char *why, size_t wlen);

/* The value of environment variable NAME copied into buf (true), then
 * blanked in place and removed from the environment, so that neither a
 * child nor a core dump carries it; false when unset. */
bool gw_secret_from_env(const char *name, char *buf, size_t len);

/* Overwrites a secret given on the command line (the bytes /proc/PID/
 * cmdline shows) and warns that it was visible until now; opt names the
 * option for the warning. */
void gw_secret_scrub_arg(char *arg, const char *opt);

#endif
