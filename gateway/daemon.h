/* The daemon: what nvmf-gateway run does once its options are read. */
#ifndef GW_DAEMON_H
#define GW_DAEMON_H

#include <stdbool.h>

/* Loads PATH, forks into the background unless FOREGROUND (the parent
 * exits once the child is up or has failed), serves every export until
 * SIGINT or SIGTERM; the process's exit status. */
int daemon_run(const char *path, bool foreground);

#endif
