/* Where the running daemon's control socket is, for `reload -c FILE`
 * under systemd after the file's gateway.control was changed: the daemon
 * keeps its socket until a restart (control is a restart-only key), and
 * the new file names one nobody listens on, so systemctl reload could not
 * reach it.  The daemon records its socket in the unit's runtime
 * directory ($RUNTIME_DIRECTORY, set by systemd for every command of the
 * unit); the reload, run by systemd with $MAINPID, asks there. */
#ifndef GW_RUNTIME_CONTROL_H
#define GW_RUNTIME_CONTROL_H
#include <stddef.h>

/* Records path as the control socket of this process; nothing without
 * $RUNTIME_DIRECTORY.  0 or -errno. */
int runtime_control_record(const char *path);
/* The socket to ask instead of from_file (the file's gateway.control):
 * the one recorded by $MAINPID when it differs (copied into buf, said on
 * stderr), else from_file. */
const char *runtime_control_lookup(const char *from_file, char *buf, size_t len);
#endif
