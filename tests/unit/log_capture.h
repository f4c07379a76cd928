/* What the gateway's logger writes (stderr) during part of a test case,
 * into a memfd, for the case to read back. */
#ifndef NVMF_GATEWAY_LOG_CAPTURE_H
#define NVMF_GATEWAY_LOG_CAPTURE_H

#include <stddef.h>

struct log_capture {
	int fd, saved;
};

void log_capture_begin(struct log_capture *c);
/* Puts stderr back; what was written meanwhile into buf, NUL-terminated
 * (at most cap - 1 bytes); its length. */
size_t log_capture_end(struct log_capture *c, char *buf, size_t cap);

#endif
