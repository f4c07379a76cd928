/* Configuration loading.  The schema is a set of field tables (key, kind,
 * where the value goes, range or check); one walker applies them to the
 * libconfig tree, so types, ranges, unknown keys and required keys are
 * handled the same way everywhere.  Checks that span objects (duplicate
 * names, export -> target, nbd devices) run afterwards on the structs.
 * Errors are collected, never fatal, so that one run reports all of them. */
#include "gateway/config.h"

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

/* Grows *ARR to hold one more element; false (and c->nomem) on failure. */
bool cfg_grow(struct ctx *c, void **arr, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return true;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *p = reallocarray(*arr, ncap, size);
	if (!p) {
		c->nomem = true;
		return false;
	}
	*arr = p;
	*cap = ncap;
	return true;
}

__attribute__((format(printf, 4, 5)))
void cfg_err_line(struct ctx *c, const char *file, int line,
		     const char *fmt, ...)
{
	struct cfg_error e = { .file = file, .line = line,
			       .seq = (unsigned)c->nr_errs };
	va_list ap;

	if (!cfg_grow(c, (void **)&c->errs, &c->cap_errs, c->nr_errs, sizeof(e)))
		return;
	va_start(ap, fmt);
	int n = vasprintf(&e.msg, fmt, ap);
	va_end(ap);
	if (n < 0) {
		c->nomem = true;
		return;
	}
	/* A quoted value may hold a newline or other control bytes (a
	 * libconfig string can span lines): escaped, so that each error stays
	 * one "FILE:LINE: message" line. */
	size_t ctl = 0;
	for (const char *p = e.msg; *p; p++)
		ctl += (unsigned char)*p < 0x20 || *p == 0x7f;
	if (ctl) {
		char *q = malloc((size_t)n + 3 * ctl + 1), *o = q;
		if (!q) {
			free(e.msg);
			c->nomem = true;
			return;
		}
		for (const char *p = e.msg; *p; p++) {
			unsigned char ch = (unsigned char)*p;
			if (ch < 0x20 || ch == 0x7f)
				o += sprintf(o, "\\x%02x", ch);
			else
				*o++ = (char)ch;
		}
		*o = 0;
		free(e.msg);
		e.msg = q;
	}
	c->errs[c->nr_errs++] = e;
}

const char *cfg_setting_file(const struct ctx *c, const config_setting_t *s)
{
	/* Settings of the main file carry no name when read from a string;
	 * only @include'd ones do. */
	const char *f = config_setting_source_file(s);
	return f ? f : c->path;
}

const char *cfg_type_name(int type)
{
	static const char *const names[] = {
		[CONFIG_TYPE_NONE] = "nothing", [CONFIG_TYPE_GROUP] = "a group",
		[CONFIG_TYPE_INT] = "an integer",
		[CONFIG_TYPE_INT64] = "an integer",
		[CONFIG_TYPE_FLOAT] = "a float",
		[CONFIG_TYPE_STRING] = "a string",
		[CONFIG_TYPE_BOOL] = "a boolean", [CONFIG_TYPE_ARRAY] = "an array",
		[CONFIG_TYPE_LIST] = "a list",
	};
	return names[type];
}

void cfg_err_type(struct ctx *c, const config_setting_t *s,
		     const char *path, const char *expected)
{
	err_at(c, s, "%s: expected %s, got %s", path, expected,
	       cfg_type_name(config_setting_type(s)));
}

bool cfg_is_int(const config_setting_t *s)
{
	int t = config_setting_type(s);
	return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}

bool cfg_line_is_wide(const struct ctx *c, const char *file, int line)
{
	for (size_t i = 0; i < c->nr_wide; i++)
		if (c->wide[i].line == line && !strcmp(c->wide[i].file, file))
			return true;
	return false;
}

/* The value of integer setting S if it is within MIN..MAX. */
bool cfg_int_in_range(struct ctx *c, const config_setting_t *s,
			 const char *path, long long min, long long max,
			 long long *v)
{
	*v = config_setting_get_int64(s);
	/* A wrapped literal was reported by scan_wide_ints already. */
	if (config_setting_type(s) == CONFIG_TYPE_INT &&
	    cfg_line_is_wide(c, cfg_setting_file(c, s), config_setting_source_line(s)))
		return false;
	if (*v >= min && *v <= max)
		return true;
	if (max == LLONG_MAX)
		err_at(c, s, "%s = %lld is out of range: must be at least %lld",
		       path, *v, min);
	else
		err_at(c, s, "%s = %lld is out of range %lld..%lld", path, *v,
		       min, max);
	return false;
}

/* ---- shared parsers ---- */

int config_parse_nbd_device(const char *s, int *out)
{
	static const char prefix[] = "/dev/nbd";

	if (strcmp(s, "auto") == 0) {
		*out = GW_NBD_AUTO;
		return 0;
	}
	if (strncmp(s, prefix, sizeof(prefix) - 1) != 0)
		return -EINVAL;
	const char *d = s + sizeof(prefix) - 1;
	size_t n = strlen(d);
	/* No leading zero: /dev/nbd01 would not name the device /dev/nbd1
	 * is, and the duplicate check compares numbers. */
	if (n < 1 || n > 9 || strspn(d, DIGITS) != n || (d[0] == '0' && n > 1))
		return -EINVAL;
	*out = (int)strtol(d, NULL, 10);
	return 0;
}

void config_default_control(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	/* An unprivileged daemon cannot create /run/nvmf-gateway; its own
	 * runtime directory is where systemd --user and logind expect it. */
	if (geteuid() != 0 && xdg && xdg[0] == '/' &&
	    strlen(xdg) + sizeof("/nvmf-gateway/gateway.control") <= UNIX_PATH_MAX)
		snprintf(buf, len, "%s/nvmf-gateway/gateway.control", xdg);
	else
		snprintf(buf, len, "%s", GW_CONTROL_DEFAULT_PATH);
}

struct gw_target *config_find_target(const struct gw_config *cfg,
				     const char *name)
{
	for (size_t i = 0; i < cfg->nr_targets; i++)
		if (cfg->targets[i].name && strcmp(cfg->targets[i].name, name) == 0)
			return &cfg->targets[i];
	return NULL;
}

/* ---- loading ---- */

static int read_text(const char *path, char **out, FILE *errs)
{
	FILE *f = fopen(path, "re");
	size_t cap = 0;
	int ret = 0;

	*out = NULL;
	if (!f) {
		ret = -errno;
		goto fail;
	}
	/* NUL as delimiter reads the whole file, and stops early exactly when
	 * libconfig would, at an embedded NUL. */
	ssize_t n = getdelim(out, &cap, '\0', f);
	if (n < 0 && ferror(f))
		ret = -errno;
	fclose(f);
	if (ret)
		goto fail;
	if (n > 0 && (*out)[n - 1] == '\0') {
		fprintf(errs, "%s: not a text file (NUL byte at offset %zd)\n",
			path, n - 1);
		free(*out);
		return -EINVAL;
	}
	if (n < 0) {
		free(*out);
		*out = strdup("");
		if (!*out)
			ret = -ENOMEM;
	}
	if (!ret)
		return 0;
fail:
	free(*out);
	fprintf(errs, "%s: cannot open: %s\n", path, strerror(-ret));
	return ret;
}

static int cmp_errors(const void *a, const void *b)
{
	const struct cfg_error *x = a, *y = b;
	int d = strcmp(x->file, y->file);

	if (d)
		return d;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Prints the errors in file order; the status config_load returns. */
static int report(struct ctx *c, FILE *errs)
{
	if (c->nomem) {
		fprintf(errs, "%s: out of memory\n", c->path);
		return -ENOMEM;
	}
	if (!c->nr_errs)
		return 0;
	qsort(c->errs, c->nr_errs, sizeof(*c->errs), cmp_errors);
	for (size_t i = 0; i < c->nr_errs; i++)
		fprintf(errs, "%s:%d: %s\n", c->errs[i].file, c->errs[i].line,
			c->errs[i].msg);
	return -EINVAL;
}

static struct gw_config *load_tree(struct ctx *c, config_t *lc,
				   const char *text)
{
	if (!config_read_string(lc, text)) {
		const char *f = config_error_file(lc);
		cfg_err_line(c, f ? f : c->path, config_error_line(lc), "%s",
			 config_error_text(lc));
		return NULL;
	}
	cfg_scan_wide_ints(c, text);

	struct gw_config *cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		c->nomem = true;
		return NULL;
	}
	cfg_init_defaults(c, cfg);
	const config_setting_t *root = config_root_setting(lc);
	cfg_parse_root(c, root, cfg);
	cfg->dflt_reactors = c->running ? c->running->dflt_reactors : cfg->reactors;
	cfg->dflt_nbd_interface = c->running ? c->running->dflt_nbd_interface
					     : cfg->nbd_interface;
	cfg_check_targets(c, cfg, config_setting_get_member(root, "targets"));
	cfg_check_exports(c, cfg, config_setting_get_member(root, "exports"));
	cfg_check_access(c, cfg, root);
	cfg_check_discovery(c, cfg, root);
	cfg_check_auto(c, cfg, config_setting_get_member(root, "auto_export"));
	return cfg;
}

int config_load_running(const char *path, const struct gw_config *running,
			struct gw_config **out, FILE *errs)
{
	struct ctx c = { .path = path, .running = running };
	config_t lc;
	char *text;
	int ret = read_text(path, &text, errs);

	if (ret)
		return ret;
	config_init(&lc);
	struct gw_config *cfg = load_tree(&c, &lc, text);
	ret = report(&c, errs);
	/* Error file names point into lc. */
	config_destroy(&lc);
	for (size_t i = 0; i < c.nr_errs; i++)
		free(c.errs[i].msg);
	free(c.errs);
	cfg_scan_free(&c);
	free(text);
	if (ret) {
		config_free(cfg);
		return ret;
	}
	*out = cfg;
	return 0;
}

int config_load(const char *path, struct gw_config **out, FILE *errs)
{
	return config_load_running(path, NULL, out, errs);
}

static const char *plural(size_t n)
{
	return n == 1 ? "" : "s";
}

void config_summary(const struct gw_config *cfg, FILE *f)
{
	size_t paths = 0, nbd = 0, fuse = 0;

	for (size_t i = 0; i < cfg->nr_targets; i++)
		paths += cfg->targets[i].nr_paths;
	for (size_t i = 0; i < cfg->nr_exports; i++) {
		nbd += cfg->exports[i].has_nbd;
		fuse += cfg->exports[i].fuse;
	}
	fprintf(f, "%s: OK: %zu target%s (%zu path%s), %zu export%s (%zu nbd, %zu fuse)",
		cfg->path, cfg->nr_targets, plural(cfg->nr_targets), paths,
		plural(paths), cfg->nr_exports, plural(cfg->nr_exports), nbd,
		fuse);
	if (cfg->auto_export.nr)
		fprintf(f, ", %zu auto_export polic%s", cfg->auto_export.nr,
			cfg->auto_export.nr == 1 ? "y" : "ies");
	fprintf(f, "\n");
}
