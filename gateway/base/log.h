/* Logging: levels, printf-checked, object prefixes, stderr.
 * When JOURNAL_STREAM is set (stderr is a journald stream) each line starts
 * with the sd-daemon "<N>" priority so journald keeps the level. */
#ifndef GW_LOG_H
#define GW_LOG_H

#include <stdarg.h>
#include <stddef.h>

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

#endif
