/* Logging: levels, printf-checked, object prefixes, stderr.
 * When JOURNAL_STREAM is set (stderr is a journald stream) each line starts
 * with the sd-daemon "<N>" priority so journald keeps the level. */
#ifndef GW_LOG_H
#define GW_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level {
	LOG_LVL_ERR = 3,
	LOG_LVL_WARN = 4,
	LOG_LVL_NOTICE = 5,
	LOG_LVL_INFO = 6,
	LOG_LVL_DEBUG = 7,
};

void log_init(void);
/* The same logger for another program of the project (the test target):
 * lines start "IDENT:", with a monotonic [s.ms] stamp when stamp is set;
 * the level comes from the environment variable ENV, else def. */
void log_init_as(const char *ident, const char *env, enum log_level def, int stamp);
void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);
/* Parses "error|warn|notice|info|debug"; -EINVAL on anything else. */
int log_parse_level(const char *s, enum log_level *out);
void log_msg(enum log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level lvl, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

#define log_enabled(lvl) ((lvl) <= log_get_level())
#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_LVL_NOTICE, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)                                                   \
	do {                                                             \
		if (log_enabled(LOG_LVL_DEBUG))                          \
			log_msg(LOG_LVL_DEBUG, __VA_ARGS__);             \
	} while (0)

/* The base of the object-prefixed log macros (ctrl_log, target_log,
 * path_log): LOG_LVL_<lvl>, and a debug line costs nothing when off. */
#define obj_log(lvl, ...)                                                \
	do {                                                             \
		if (log_enabled(LOG_LVL_##lvl))                          \
			log_msg(LOG_LVL_##lvl, __VA_ARGS__);             \
	} while (0)

/* n bytes a peer sent (a name, a model string), fit for one log line in
 * dst: anything but printable ASCII, and the quote the line puts around
 * it, becomes '?', so no newline or escape of theirs forges a line.
 * Trailing NULs (a fixed field's padding) are left out. */
void log_printable(char *dst, size_t len, const void *src, size_t n);

/* Lines a peer can cause at will, one per connection it opens (a refused
 * connection, a handshake that fails): each call site lets through at
 * most LOG_RL_BURST lines per LOG_RL_INTERVAL_S seconds on each thread;
 * the lines left out are counted and the next line let through says how
 * many; the last line of a burst says that it is the last for now.  A
 * flood of connections then costs the journal a few lines a minute, and
 * never reaches journald's own rate limit, which drops the
 * service's lines without choosing which (the path-loss lines among
 * them).  Lines of established clients are not limited. */
#define LOG_RL_BURST 10
#define LOG_RL_INTERVAL_S 10
struct log_rl {
	uint64_t start_ns; /* the current interval's start, 0 = none yet */
	unsigned n;        /* lines let through in it */
	unsigned left_out; /* lines left out since the last one let through */
};
/* Whether a line at now_ns passes; when it does, *left_out is how many
 * were left out before it (then counted from 0 again). */
bool log_rl_pass(struct log_rl *rl, uint64_t now_ns, unsigned *left_out);
void log_rl_msg(struct log_rl *rl, enum log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* log_rl(WARN, ...): rate-limited per call site and thread. */
#define log_rl(lvl, ...)                                                 \
	do {                                                             \
		static __thread struct log_rl log_rl_site_;              \
		log_rl_msg(&log_rl_site_, LOG_LVL_##lvl, __VA_ARGS__);   \
	} while (0)

#endif
