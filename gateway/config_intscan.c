/* libconfig 1.5 reads an integer literal past 32 bits without the L suffix
 * as its low 32 bits, silently; this scanner walks the file's text for such
 * literals so that the loader reports them instead. */
#include <ctype.h>
#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gateway/config_priv.h"

/* ---- libconfig 1.5 integer wrap-around ---- */

static const char *skip_string(const char *p, int *line)
{
	for (p++; *p && *p != '"'; p++) {
		if (*p == '\n')
			(*line)++;
		else if (*p == '\\' && p[1])
			p++;
	}
	return *p ? p + 1 : p;
}

static const char *skip_block_comment(const char *p, int *line)
{
	const char *end = strstr(p + 2, "*/");

	if (!end)
		return p + strlen(p);
	for (; p < end; p++)
		if (*p == '\n')
			(*line)++;
	return end + 2;
}

static const char *check_literal(struct ctx *c, const char *p, int line)
{
	const char *d = p + (*p == '+' || *p == '-');
	bool hex = d[0] == '0' && (d[1] == 'x' || d[1] == 'X');
	const char *end = hex ? d + 2 + strspn(d + 2, DIGITS "abcdefABCDEF")
			      : d + strspn(d, DIGITS);
	bool wide;

	if (!hex && (*end == '.' || *end == 'e' || *end == 'E'))
		return end + strspn(end, DIGITS ".eE+-");
	if (*end == 'L')
		return end + 1;
	errno = 0;
	if (hex) {
		unsigned long long v = strtoull(d, NULL, 16);
		wide = errno == ERANGE || v > INT32_MAX;
	} else {
		long long v = strtoll(p, NULL, 10);
		wide = errno == ERANGE || v > INT32_MAX || v < INT32_MIN;
	}
	if (wide) {
		int len = (int)(end - p);
		cfg_err_line(c, c->path, line,
			 "integer %.*s does not fit in 32 bits and libconfig would wrap it: write %.*sL",
			 len, p, len, p);
		if (cfg_grow(c, (void **)&c->wide_lines, &c->cap_wide, c->nr_wide,
			 sizeof(int)))
			c->wide_lines[c->nr_wide++] = line;
	}
	return end;
}

/* libconfig 1.5 keeps an integer literal without an L suffix in 32 bits and
 * silently wraps a larger one (nsid = 4294967297 reads as 1), so a wrapped
 * value could pass a range check.  Such literals are found in the text
 * itself, skipping strings, comments and names as libconfig's scanner does.
 * @include'd files are not scanned. */
void cfg_scan_wide_ints(struct ctx *c, const char *p)
{
	int line = 1;

	while (*p) {
		unsigned char ch = (unsigned char)*p;

		if (ch == '\n') {
			line++;
			p++;
		} else if (ch == '"') {
			p = skip_string(p, &line);
		} else if (ch == '#' || strncmp(p, "//", 2) == 0) {
			p += strcspn(p, "\n");
		} else if (strncmp(p, "/*", 2) == 0) {
			p = skip_block_comment(p, &line);
		} else if (isalpha(ch) || ch == '*') {
			p += 1 + strspn(p + 1, LC_NAME_TAIL);
		} else if (isdigit(ch) ||
			   ((ch == '-' || ch == '+') && isdigit((unsigned char)p[1]))) {
			p = check_literal(c, p, line);
		} else {
			p++;
		}
	}
}
