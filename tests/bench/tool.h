/*
 * What the bench's small C tools (wire.c, pingpong.c, floor.c) share: they stop at
 * the first failed call, since a figure measured after one means nothing.
 */
#ifndef NVMF_BENCH_TOOL_H
#define NVMF_BENCH_TOOL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Set by each tool's main file before the include: its name in messages. */
#ifndef TOOL_NAME
#error "define TOOL_NAME before including tool.h"
#endif

static inline void die(const char *what)
{
	fprintf(stderr, TOOL_NAME ": %s: %s\n", what, strerror(errno));
	exit(1);
}

static inline uint64_t now_ns(clockid_t c)
{
	struct timespec ts;

	if (clock_gettime(c, &ts))
		die("clock_gettime");
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Busy and total jiffies of all CPUs, as the bench's host_busy counts
 * them (steal is busy; idle and iowait are not). */
static inline void host_busy(unsigned long long *busy, unsigned long long *total)
{
	unsigned long long u, n, sy, id, io, irq, sirq, st;
	FILE *f = fopen("/proc/stat", "r");

	if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &u, &n, &sy, &id, &io, &irq,
			 &sirq, &st) != 8)
		die("/proc/stat");
	fclose(f);
	*busy = u + n + sy + irq + sirq + st;
	*total = *busy + id + io;
}

#endif
