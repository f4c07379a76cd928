/* libconfig 1.5 reads an integer literal past 32 bits without the L suffix
 * as its low 32 bits, silently; this scanner walks the file's text, and
 * the files it @includes, for such literals so that the loader reports
 * them instead. */
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

static const char *check_literal(struct ctx *c, const char *file, const char *p, int line)
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
		cfg_err_line(c, file, line,
			 "integer %.*s does not fit in 32 bits and libconfig would wrap it: write %.*sL",
			 len, p, len, p);
		if (cfg_grow(c, (void **)&c->wide, &c->cap_wide, c->nr_wide, sizeof(*c->wide)))
			c->wide[c->nr_wide++] = (struct cfg_wide){ .file = file, .line = line };
	}
	return end;
}

/* libconfig 1.5's MAX_INCLUDE_DEPTH: a file nested deeper failed the parse. */
#define INCLUDE_DEPTH_MAX 10

static void scan_text(struct ctx *c, const char *file, const char *p, int depth);

/* An @include directive at p (the start of a line), as libconfig 1.5's
 * scanner takes it: ^[ \t]*@include[ \t]+"NAME", where \\ and \" in NAME
 * are a backslash and a quote and any other backslash is dropped.  The
 * end of the directive with NAME in name, or NULL if p holds none. */
static const char *include_at(const char *p, char *name, size_t len)
{
	size_t n = 0;

	p += strspn(p, " \t");
	if (strncmp(p, "@include", 8) || (p[8] != ' ' && p[8] != '\t'))
		return NULL;
	p += 8 + strspn(p + 8, " \t");
	if (*p++ != '"')
		return NULL;
	for (; *p && *p != '"'; p++) {
		if (*p == '\\' && (p[1] == '\\' || p[1] == '"'))
			p++;
		else if (*p == '\\')
			continue;
		if (n + 1 >= len)
			return NULL;
		name[n++] = *p;
	}
	name[n] = 0;
	return *p ? p + 1 : NULL;
}

/* Scans the file libconfig read for an @include of name (met at file:line):
 * the name as written, relative to the working directory as libconfig
 * opens it (no include_dir is set).  Each file once. */
static void scan_include(struct ctx *c, const char *file, int line, const char *name,
			 int depth)
{
	char *text = NULL, *copy;
	size_t cap = 0;
	FILE *f;

	if (depth > INCLUDE_DEPTH_MAX)
		return;
	for (size_t i = 0; i < c->nr_inc; i++)
		if (!strcmp(c->inc_files[i], name))
			return;
	if (!(copy = strdup(name)) ||
	    !cfg_grow(c, (void **)&c->inc_files, &c->cap_inc, c->nr_inc, sizeof(char *))) {
		free(copy);
		c->nomem = true;
		return;
	}
	c->inc_files[c->nr_inc++] = copy;
	/* libconfig opened it a moment ago; if it is gone now, what was
	 * read cannot be checked, so the load fails. */
	f = fopen(name, "re");
	if (!f || getdelim(&text, &cap, '\0', f) < 0) {
		if (!f || ferror(f))
			cfg_err_line(c, file, line,
				     "@include \"%s\": cannot read it to check its integers: %s",
				     name, strerror(errno));
		else
			scan_text(c, copy, "", depth);
		if (f)
			fclose(f);
		free(text);
		return;
	}
	fclose(f);
	scan_text(c, copy, text, depth);
	free(text);
}

/* libconfig 1.5 keeps an integer literal without an L suffix in 32 bits and
 * silently wraps a larger one (nsid = 4294967297 reads as 1), so a wrapped
 * value could pass a range check.  Such literals are found in the text
 * itself, skipping strings, comments and names as libconfig's scanner does;
 * the files it @includes are scanned the same way, under their own names
 * (config_setting_source_file's). */
static void scan_text(struct ctx *c, const char *file, const char *p, int depth)
{
	const char *start = p;
	int line = 1;

	while (*p) {
		unsigned char ch = (unsigned char)*p;
		char name[PATH_MAX];
		const char *end;

		if ((p == start || p[-1] == '\n') && (end = include_at(p, name, sizeof(name)))) {
			scan_include(c, file, line, name, depth + 1);
			p = end;
		} else if (ch == '\n') {
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
			p = check_literal(c, file, p, line);
		} else {
			p++;
		}
	}
}

void cfg_scan_wide_ints(struct ctx *c, const char *text)
{
	scan_text(c, c->path, text, 0);
}

void cfg_scan_free(struct ctx *c)
{
	for (size_t i = 0; i < c->nr_inc; i++)
		free(c->inc_files[i]);
	free(c->inc_files);
	free(c->wide);
}
