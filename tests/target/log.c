/* The target's own implementation of gateway/log.h: the same calls, lines
 * prefixed "nvmf-test-target" with a monotonic timestamp, so a test log that
 * holds both programs' lines tells them apart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/log.h"

static enum log_level cur_level = LOG_LVL_INFO;

void log_init(void)
{
	const char *lvl = getenv("NVMF_TEST_TARGET_LOG");
	enum log_level l;

	if (lvl && log_parse_level(lvl, &l) == 0)
		cur_level = l;
}

void log_set_level(enum log_level lvl) { cur_level = lvl; }
enum log_level log_get_level(void) { return cur_level; }

static const char *const names[] = { [LOG_LVL_ERR] = "error", [LOG_LVL_WARN] = "warn",
				     [LOG_LVL_NOTICE] = "notice", [LOG_LVL_INFO] = "info",
				     [LOG_LVL_DEBUG] = "debug" };

int log_parse_level(const char *s, enum log_level *out)
{
	for (unsigned i = LOG_LVL_ERR; i <= LOG_LVL_DEBUG; i++)
		if (!strcmp(s, names[i])) {
			*out = (enum log_level)i;
			return 0;
		}
	return -1;
}

void log_vmsg(enum log_level lvl, const char *fmt, va_list ap)
{
	char line[1024];
	struct timespec ts;
	int n;

	if (lvl > cur_level)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	n = snprintf(line, sizeof(line), "nvmf-test-target: [%ld.%03ld] %s: ", (long)ts.tv_sec,
		     ts.tv_nsec / 1000000, names[lvl]);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		return;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	fwrite(line, 1, len, stderr);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(lvl, fmt, ap);
	va_end(ap);
}
