/* Text parsers shared by the configuration file and the command line. */
#ifndef GW_PARSE_H
#define GW_PARSE_H

#include <stdint.h>

/* 0, or -EINVAL on bad syntax. */
/* "400M", "4k", "1G", "2T", "512": base 1024; -ERANGE past 2^64-1. */
int gw_parse_size(const char *s, uint64_t *out);
/* A TCP port, "1".."65535" in decimal. */
int gw_parse_port(const char *s, uint16_t *out);

#endif
