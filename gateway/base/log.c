#include "gateway/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static enum log_level cur_level = LOG_LVL_NOTICE;
static int journal_prefix;
static const char *log_ident = "nvmf-gateway";
static int log_stamp;

static const char *const level_names[] = {
	[LOG_LVL_ERR] = "error", [LOG_LVL_WARN] = "warn",
	[LOG_LVL_NOTICE] = "notice", [LOG_LVL_INFO] = "info",
	[LOG_LVL_DEBUG] = "debug",
};

void log_init_as(const char *ident, const char *env, enum log_level def, int stamp)
{
	const char *lvl = getenv(env);
	enum log_level l;

	log_ident = ident;
	log_stamp = stamp;
	cur_level = def;
	journal_prefix = getenv("JOURNAL_STREAM") != NULL;
	if (lvl && log_parse_level(lvl, &l) == 0)
		cur_level = l;
}

/* NVMF_GATEWAY_LOG_STAMP=1: every line carries CLOCK_MONOTONIC, so that
 * tests time behaviours by the gateway's own clock, not by when a slow
 * client got to see them. */
void log_init(void)
{
	const char *st = getenv("NVMF_GATEWAY_LOG_STAMP");

	log_init_as("nvmf-gateway", "NVMF_GATEWAY_LOG", LOG_LVL_NOTICE, st && strcmp(st, "0") != 0);
}

void log_set_level(enum log_level lvl) { cur_level = lvl; }
enum log_level log_get_level(void) { return cur_level; }

int log_parse_level(const char *s, enum log_level *out)
{
	for (unsigned i = LOG_LVL_ERR; i <= LOG_LVL_DEBUG; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	if (strcmp(s, "warning") == 0) {
		*out = LOG_LVL_WARN;
		return 0;
	}
	return -EINVAL;
}

void log_vmsg(enum log_level lvl, const char *fmt, va_list ap)
{
	char line[1024];
	int n = 0;

	if (lvl > cur_level)
		return;
	/* Build the whole line first so that lines from several reactor
	 * threads never interleave within a line. */
	if (journal_prefix) {
		n = snprintf(line, sizeof(line), "<%d>", lvl);
	} else if (log_stamp) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		n = snprintf(line, sizeof(line), "%s: [%ld.%03ld] %s: ", log_ident,
			     (long)ts.tv_sec, ts.tv_nsec / 1000000, level_names[lvl]);
	} else {
		n = snprintf(line, sizeof(line), "%s: %s: ", log_ident, level_names[lvl]);
	}
	if (n < 0)
		return;
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

void log_printable(char *dst, size_t len, const void *src, size_t n)
{
	const unsigned char *s = src;
	size_t i;

	if (!len)
		return;
	/* Trailing NULs are a fixed field's padding; one inside is shown. */
	while (n && !s[n - 1])
		n--;
	if (n > len - 1)
		n = len - 1;
	for (i = 0; i < n; i++)
		dst[i] = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\'' ? (char)s[i] : '?';
	dst[i] = 0;
}

bool log_rl_pass(struct log_rl *rl, uint64_t now_ns, unsigned *left_out)
{
	if (!rl->start_ns || (now_ns >= rl->start_ns &&
			      now_ns - rl->start_ns >= (uint64_t)LOG_RL_INTERVAL_S * 1000000000ull)) {
		rl->start_ns = now_ns ? now_ns : 1;
		rl->n = 0;
	}
	if (rl->n >= LOG_RL_BURST) {
		if (rl->left_out < UINT32_MAX)
			rl->left_out++;
		return false;
	}
	rl->n++;
	*left_out = rl->left_out;
	rl->left_out = 0;
	return true;
}

void log_rl_msg(struct log_rl *rl, enum log_level lvl, const char *fmt, ...)
{
	struct timespec ts;
	char text[768];
	unsigned left_out;
	va_list ap;

	/* A line below the level is neither shown nor counted. */
	if (lvl > cur_level)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (!log_rl_pass(rl, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, &left_out))
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	/* The burst's last line says so: a flood that stops right after it
	 * has no later line to carry its count, and the reader should know
	 * that the silence is the limit's, not the end of the flood. */
	bool last = rl->n == LOG_RL_BURST;
	char more[64] = "";
	if (!left_out && !last) {
		log_msg(lvl, "%s", text);
		return;
	}
	if (left_out)
		snprintf(more, sizeof(more), "and %u more like it, not logged%s", left_out,
			 last ? "; " : "");
	log_msg(lvl, "%s (%s%s: at most %u lines in %u s)", text, more,
		last ? "the last line like it for now" : "", LOG_RL_BURST, LOG_RL_INTERVAL_S);
}
