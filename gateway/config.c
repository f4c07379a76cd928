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

#include "gateway/base/membudget.h"
#include "gateway/base/parse.h"
#include "gateway/secret.h"
#include "transports/auth/auth.h"

#define DIGITS "0123456789"
#define ALPHA "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
#define NAME_CHARS ALPHA DIGITS "._-"
/* After the first character of a libconfig setting name. */
#define LC_NAME_TAIL ALPHA DIGITS "-_*"
#define NQN_MAX 223
#define NAME_MAX_LEN 64
#define MAX_REACTORS 256
#define UNIX_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

/* K_ENUM stores an int into the enum members. */
_Static_assert(sizeof(enum gw_transport) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gw_multipath) == sizeof(int), "enum size");

struct cfg_error {
	const char *file;
	int line;
	unsigned seq;
	char *msg;
};

struct ctx {
	const char *path;
	struct cfg_error *errs;
	size_t nr_errs, cap_errs;
	int *wide_lines;	/* lines holding a literal libconfig wrapped */
	size_t nr_wide, cap_wide;
	bool nomem;
};

/* Grows *ARR to hold one more element; false (and c->nomem) on failure. */
static bool grow(struct ctx *c, void **arr, size_t *cap, size_t n, size_t size)
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
static void err_line(struct ctx *c, const char *file, int line,
		     const char *fmt, ...)
{
	struct cfg_error e = { .file = file, .line = line,
			       .seq = (unsigned)c->nr_errs };
	va_list ap;

	if (!grow(c, (void **)&c->errs, &c->cap_errs, c->nr_errs, sizeof(e)))
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

static const char *setting_file(const struct ctx *c, const config_setting_t *s)
{
	/* Settings of the main file carry no name when read from a string;
	 * only @include'd ones do. */
	const char *f = config_setting_source_file(s);
	return f ? f : c->path;
}

#define err_at(c, s, ...)                                                \
	err_line((c), setting_file((c), (s)), config_setting_source_line(s), \
		 __VA_ARGS__)

static const char *type_name(int type)
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

static void err_type(struct ctx *c, const config_setting_t *s,
		     const char *path, const char *expected)
{
	err_at(c, s, "%s: expected %s, got %s", path, expected,
	       type_name(config_setting_type(s)));
}

static bool is_int(const config_setting_t *s)
{
	int t = config_setting_type(s);
	return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}

static bool line_is_wide(const struct ctx *c, int line)
{
	for (size_t i = 0; i < c->nr_wide; i++)
		if (c->wide_lines[i] == line)
			return true;
	return false;
}

/* The value of integer setting S if it is within MIN..MAX. */
static bool int_in_range(struct ctx *c, const config_setting_t *s,
			 const char *path, long long min, long long max,
			 long long *v)
{
	*v = config_setting_get_int64(s);
	/* A wrapped literal was reported by scan_wide_ints already. */
	if (config_setting_type(s) == CONFIG_TYPE_INT &&
	    line_is_wide(c, config_setting_source_line(s)))
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

/* ---- string checks: NULL, or why the value is wrong ---- */

static const char *chk_name(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > NAME_MAX_LEN || strspn(s, NAME_CHARS) != n)
		return "use 1-64 characters of A-Z a-z 0-9 . _ -";
	return NULL;
}

static const char *chk_nqn(const char *s)
{
	if (strncmp(s, "nqn.", 4) != 0)
		return "an NQN starts with \"nqn.\"";
	if (strlen(s) > NQN_MAX)
		return "an NQN is at most 223 bytes";
	return NULL;
}

static const char *chk_uuid(const char *s)
{
	static const char form[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";

	if (strlen(s) != sizeof(form) - 1)
		goto bad;
	for (size_t i = 0; form[i]; i++)
		if (form[i] == '-' ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
			goto bad;
	return NULL;
bad:
	return "expected a UUID, xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
}

static const char *chk_word(const char *s)
{
	if (!*s)
		return "must not be empty";
	for (; *s; s++)
		if (isspace((unsigned char)*s))
			return "must not contain spaces";
	return NULL;
}

static const char *chk_ifname(const char *s)
{
	const char *why = chk_word(s);

	if (!why && strlen(s) >= IFNAMSIZ)
		why = "an interface name is at most 15 characters";
	return why;
}

static const char *chk_abspath(const char *s)
{
	return s[0] == '/' ? NULL : "must be an absolute path";
}

static const char *chk_sockpath(const char *s)
{
	const char *why = chk_abspath(s);

	if (!why && strlen(s) >= UNIX_PATH_MAX)
		why = "a socket path is at most 107 bytes";
	return why;
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

/* ---- the schema ---- */

enum kind {
	K_INT,		/* int */
	K_U32,		/* uint32_t */
	K_U64,		/* uint64_t */
	K_BOOL,		/* bool */
	K_STR,		/* char *, strdup'ed */
	K_ENUM,		/* an enum, from a string of .choices */
	K_FN,		/* .parse decides */
	K_GROUP,	/* .sub, stored into the same object */
	K_LIST,		/* of groups: .sub, array at .off, count at .count_off */
};

struct choice {
	const char *name;
	int value;
};

typedef void parse_fn(struct ctx *c, const config_setting_t *s,
		      const char *path, void *dst);

struct schema;

struct field {
	const char *key;
	enum kind kind;
	size_t off;
	bool required;
	long long min, max;
	const char *(*check)(const char *s);
	const struct choice *choices;	/* ends with a NULL name */
	parse_fn *parse;
	void (*release)(void *dst);	/* K_FN that allocates */
	const struct schema *sub;
	size_t count_off;
};

struct schema {
	const struct field *fields;	/* ends with a NULL key; < 64 */
	/* Lists: one element and its defaults. */
	size_t elem_size;
	void (*init)(struct ctx *c, void *elem);
	size_t min_count;
};

/* offsetof(T, m), and a compile error (distinct pointer types) unless
 * member m has type CT, so a table entry cannot store the wrong width. */
#define OFF(T, m, CT) (offsetof(T, m) + 0 * sizeof(&((T *)0)->m == (CT *)0))

#define F_INT(T, k, m, lo, hi)                                          \
	{ .key = k, .kind = K_INT, .off = OFF(T, m, int), .min = lo, .max = hi }
#define F_U32(T, k, m, lo, hi)                                          \
	{ .key = k, .kind = K_U32, .off = OFF(T, m, uint32_t), .min = lo,   \
	  .max = hi }
#define F_U64(T, k, m, lo, hi)                                          \
	{ .key = k, .kind = K_U64, .off = OFF(T, m, uint64_t), .min = lo,   \
	  .max = hi }
#define F_BOOL(T, k, m) { .key = k, .kind = K_BOOL, .off = OFF(T, m, bool) }
#define F_STR(T, k, m, chk, req)                                        \
	{ .key = k, .kind = K_STR, .off = OFF(T, m, char *), .check = chk,  \
	  .required = req }
#define F_ENUM(T, k, m, ch, req)                                        \
	{ .key = k, .kind = K_ENUM, .off = offsetof(T, m), .choices = ch,   \
	  .required = req }
#define F_FN(T, k, m, CT, fn, rel)                                      \
	{ .key = k, .kind = K_FN, .off = OFF(T, m, CT), .parse = fn,        \
	  .release = rel }
#define F_GROUP(k, s) { .key = k, .kind = K_GROUP, .sub = s }
#define F_LIST(T, k, m, cnt, s, req)                                    \
	{ .key = k, .kind = K_LIST, .off = offsetof(T, m),                  \
	  .count_off = OFF(T, cnt, size_t), .sub = s, .required = req }
#define F_END { .key = NULL }

static void dup_str(struct ctx *c, char **dst, const char *s)
{
	*dst = strdup(s);
	if (!*dst)
		c->nomem = true;
}

static void release_str(void *dst)
{
	free(*(char **)dst);
}

static void release_listen(void *dst)
{
	gw_listen_free(dst);
}

static void parse_log_level(struct ctx *c, const config_setting_t *s,
			    const char *path, void *dst)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		err_type(c, s, path, "a string");
		return;
	}
	const char *v = config_setting_get_string(s);
	if (log_parse_level(v, dst))
		err_at(c, s, "%s: unknown value \"%s\" (expected error|warn|notice|info|debug)",
		       path, v);
}

static void parse_trsvcid(struct ctx *c, const config_setting_t *s,
			  const char *path, void *dst)
{
	char buf[8];
	long long v;
	uint16_t port;

	if (is_int(s)) {
		if (!int_in_range(c, s, path, 1, UINT16_MAX, &v))
			return;
		port = (uint16_t)v;
	} else if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		if (gw_parse_port(config_setting_get_string(s), &port)) {
			err_at(c, s, "%s: invalid value \"%s\": expected a port 1..65535",
			       path, config_setting_get_string(s));
			return;
		}
	} else {
		err_type(c, s, path, "a string or an integer");
		return;
	}
	/* One spelling whichever way it was written. */
	snprintf(buf, sizeof(buf), "%u", port);
	free(*(char **)dst);
	dup_str(c, dst, buf);
}

static void parse_bandwidth(struct ctx *c, const config_setting_t *s,
			    const char *path, void *dst)
{
	long long v;

	if (is_int(s)) {
		if (int_in_range(c, s, path, 0, LLONG_MAX, &v))
			*(uint64_t *)dst = (uint64_t)v;
	} else if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		const char *str = config_setting_get_string(s);
		int ret = gw_parse_size(str, dst);
		if (ret)
			err_at(c, s, "%s: invalid value \"%s\": %s", path, str,
			       ret == -ERANGE ? "too large"
					      : "expected bytes/s with an optional K, M, G or T suffix");
	} else {
		err_type(c, s, path, "a string or an integer");
	}
}

/* Memory and connections: the buffer budget is a size ("256M") or bytes,
 * at least MEMBUDGET_MIN_BYTES. */
static void parse_budget(struct ctx *c, const config_setting_t *s,
			 const char *path, void *dst)
{
	uint64_t v = 0;
	long long i;

	if (is_int(s)) {
		if (!int_in_range(c, s, path, MEMBUDGET_MIN_BYTES, LLONG_MAX, &i))
			return;
		v = (uint64_t)i;
	} else if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		const char *str = config_setting_get_string(s);
		int ret = gw_parse_size(str, &v);
		if (ret || v < MEMBUDGET_MIN_BYTES) {
			err_at(c, s, "%s: invalid value \"%s\": %s", path, str,
			       ret == -ERANGE ? "too large" :
			       ret ? "expected bytes with an optional K, M, G or T suffix" :
				     "at least 1M");
			return;
		}
	} else {
		err_type(c, s, path, "a string or an integer");
		return;
	}
	*(uint64_t *)dst = v;
}

static void limits_defaults(struct gw_config *cfg)
{
	cfg->buffer_budget = MEMBUDGET_DEFAULT_BYTES;
	cfg->max_connections = 64; /* NBD_DEFAULT_MAX_CONNECTIONS */
	cfg->stall_timeout = MEMBUDGET_DEFAULT_STALL_S;
}

static void parse_nbd_device(struct ctx *c, const config_setting_t *s,
			     const char *path, void *dst)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		err_type(c, s, path, "a string");
		return;
	}
	const char *v = config_setting_get_string(s);
	if (config_parse_nbd_device(v, dst))
		err_at(c, s, "%s: invalid value \"%s\": expected \"/dev/nbdN\" or \"auto\"",
		       path, v);
}

static void parse_listen(struct ctx *c, const config_setting_t *s,
			 const char *path, void *dst)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		err_type(c, s, path, "a string");
		return;
	}
	const char *v = config_setting_get_string(s);
	int ret = gw_listen_parse(v, dst);
	if (ret == -ENOMEM)
		c->nomem = true;
	else if (ret)
		err_at(c, s, "%s: invalid value \"%s\": expected \"unix:PATH\", \"tcp:HOST:PORT\" or \"tcp:PORT\"",
		       path, v);
}

/* A file holding a secret must be for its owner's eyes only, and that
 * owner root or the gateway's own uid (gw_secret_file_problem). */
static bool secret_file_private(struct ctx *c, const config_setting_t *s,
				const char *path, const char *file, int fd)
{
	struct stat st;
	char problem[128];

	if ((fd >= 0 ? fstat(fd, &st) : stat(file, &st)) < 0) {
		err_at(c, s, "%s: cannot stat %s: %s", path, file, strerror(errno));
		return false;
	}
	if (!gw_secret_file_problem(&st, problem, sizeof(problem)))
		return true;
	if (st.st_mode & (S_IRWXG | S_IRWXO))
		err_at(c, s, "%s: %s holds a secret and %s; refusing it: chmod go-rwx %s",
		       path, file, problem, file);
	else
		err_at(c, s, "%s: %s holds a secret and %s; refusing it: chown %u %s",
		       path, file, problem, (unsigned)geteuid(), file);
	return false;
}

/* The secret itself is never echoed in a message. */
static void parse_secret(struct ctx *c, const config_setting_t *s,
			 const char *path, void *dst)
{
	struct nvmf_dhchap_key key;
	const char *why = NULL;

	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		err_type(c, s, path, "a string");
		return;
	}
	const char *v = config_setting_get_string(s);
	if (nvmf_dhchap_key_parse(v, &key, &why)) {
		err_at(c, s, "%s: invalid secret: %s", path, why);
		return;
	}
	if (!secret_file_private(c, s, path, setting_file(c, s), -1))
		return;
	free(*(char **)dst);
	dup_str(c, dst, v);
}

static parse_fn parse_access;
static void check_access(struct ctx *c, struct gw_config *cfg, const config_setting_t *root);

static const struct choice transports[] = {
	{ "tcp", GW_TRANSPORT_TCP },
	{ "rdma", GW_TRANSPORT_RDMA },
	{ NULL, 0 },
};

static const struct choice multipaths[] = {
	{ "failover", GW_MULTIPATH_FAILOVER },
	{ "round-robin", GW_MULTIPATH_ROUND_ROBIN },
	{ "queue-depth", GW_MULTIPATH_QUEUE_DEPTH },
	{ NULL, 0 },
};

static void path_init(struct ctx *c, void *elem)
{
	struct gw_path *p = elem;

	p->tos = -1;
	dup_str(c, &p->trsvcid, "4420");
}

#define P struct gw_path
static const struct field path_fields[] = {
	F_ENUM(P, "transport", transport, transports, true),
	F_STR(P, "traddr", traddr, chk_word, true),
	F_FN(P, "trsvcid", trsvcid, char *, parse_trsvcid, release_str),
	F_STR(P, "host_traddr", host_traddr, chk_word, false),
	F_STR(P, "host_iface", host_iface, chk_ifname, false),
	F_INT(P, "tos", tos, -1, 255),
	F_END,
};
#undef P

static const struct schema path_schema = {
	.fields = path_fields, .elem_size = sizeof(struct gw_path),
	.init = path_init, .min_count = 1,
};

static void target_init(struct ctx *c, void *elem)
{
	struct gw_target *t = elem;

	(void)c;
	/* nr_io_queues stays 0 until check_targets knows the reactors. */
	t->queue_size = 128;
	t->keep_alive_tmo = 5;
	t->reconnect_delay = 10;
	t->ctrl_loss_tmo = 600;
	t->fast_io_fail_tmo = -1;
	t->io_timeout = 30;
	t->max_retries = 5;
	t->multipath = GW_MULTIPATH_FAILOVER;
}

#define T struct gw_target
static const struct field target_fields[] = {
	F_STR(T, "name", name, chk_name, true),
	F_STR(T, "subnqn", subnqn, chk_nqn, true),
	F_LIST(T, "paths", paths, nr_paths, &path_schema, true),
	F_INT(T, "nr_io_queues", nr_io_queues, 1, 128),
	F_INT(T, "queue_size", queue_size, 2, 1024),
	F_BOOL(T, "hdr_digest", hdr_digest),
	F_BOOL(T, "data_digest", data_digest),
	F_INT(T, "keep_alive_tmo", keep_alive_tmo, 0, 3600),
	F_INT(T, "reconnect_delay", reconnect_delay, 1, 3600),
	F_INT(T, "ctrl_loss_tmo", ctrl_loss_tmo, -1, 86400),
	F_INT(T, "fast_io_fail_tmo", fast_io_fail_tmo, -1, 86400),
	F_INT(T, "io_timeout", io_timeout, 1, 3600),
	F_INT(T, "max_retries", max_retries, 0, 100),
	F_ENUM(T, "multipath", multipath, multipaths, false),
	F_FN(T, "dhchap_secret", dhchap_secret, char *, parse_secret, release_str),
	F_FN(T, "dhchap_ctrl_secret", dhchap_ctrl_secret, char *, parse_secret, release_str),
	F_STR(T, "dhchap_secret_file", dhchap_secret_file, chk_abspath, false),
	F_STR(T, "dhchap_ctrl_secret_file", dhchap_ctrl_secret_file, chk_abspath, false),
	F_END,
};
#undef T

static const struct schema target_schema = {
	.fields = target_fields, .elem_size = sizeof(struct gw_target),
	.init = target_init,
};

#define E struct gw_export
static const struct field nbd_fields[] = {
	F_FN(E, "device", nbd.device, int, parse_nbd_device, NULL),
	F_FN(E, "listen", nbd.listen, struct gw_listen, parse_listen,
	     release_listen),
	F_INT(E, "connections", nbd.connections, 1, 64),
	F_FN(E, "access", nbd.access, struct gw_access, parse_access, NULL),
	F_INT(E, "max_connections", nbd.max_connections, 1, 65536),
	F_END,
};

static const struct field qos_fields[] = {
	F_U64(E, "iops", qos_iops, 0, LLONG_MAX),
	F_FN(E, "bandwidth", qos_bandwidth, uint64_t, parse_bandwidth, NULL),
	F_U64(E, "read_iops", qos_read_iops, 0, LLONG_MAX),
	F_U64(E, "write_iops", qos_write_iops, 0, LLONG_MAX),
	F_FN(E, "read_bandwidth", qos_read_bandwidth, uint64_t, parse_bandwidth, NULL),
	F_FN(E, "write_bandwidth", qos_write_bandwidth, uint64_t, parse_bandwidth, NULL),
	F_END,
};

static const struct schema nbd_schema = { .fields = nbd_fields };
static const struct schema qos_schema = { .fields = qos_fields };

static const struct field export_fields[] = {
	F_STR(E, "name", name, chk_name, true),
	F_STR(E, "target", target_name, chk_name, true),
	F_U32(E, "nsid", nsid, 1, 0xFFFFFFFE),
	F_GROUP("nbd", &nbd_schema),
	F_BOOL(E, "fuse", fuse),
	F_BOOL(E, "read_only", read_only),
	F_GROUP("qos", &qos_schema),
	F_END,
};
#undef E

static void export_init(struct ctx *c, void *elem)
{
	struct gw_export *e = elem;

	(void)c;
	/* nbd.connections stays 0 until check_exports knows the reactors. */
	e->nsid = 1;
	e->nbd.device = GW_NBD_NONE;
}

static const struct schema export_schema = {
	.fields = export_fields, .elem_size = sizeof(struct gw_export),
	.init = export_init,
};

#define C struct gw_config
static const struct field gateway_fields[] = {
	F_INT(C, "reactors", reactors, 1, MAX_REACTORS),
	F_STR(C, "control", control, chk_sockpath, false),
	F_STR(C, "state_dir", state_dir, chk_abspath, false),
	F_FN(C, "log_level", log_level, enum log_level, parse_log_level, NULL),
	F_STR(C, "hostnqn", hostnqn, chk_nqn, false),
	F_STR(C, "hostid", hostid, chk_uuid, false),
	F_FN(C, "metrics", metrics, struct gw_listen, parse_listen, release_listen),
	F_FN(C, "control_access", control_access, struct gw_access, parse_access, NULL),
	F_FN(C, "metrics_access", metrics_access, struct gw_access, parse_access, NULL),
	/* memory and connections */
	F_FN(C, "buffer_budget", buffer_budget, uint64_t, parse_budget, NULL),
	F_INT(C, "max_connections", max_connections, 1, 65536),
	F_INT(C, "stall_timeout", stall_timeout, 1, 3600),
	/* Reclaim safety while a kernel NBD device or FUSE mount is served
	 * (gateway/reclaim.h); defaults in config_init_defaults. */
	F_BOOL(C, "mlock", reclaim.mlock),
	F_BOOL(C, "io_flusher", reclaim.io_flusher),
	F_INT(C, "oom_score_adj", reclaim.oom_score_adj, -1000, 1000),
	F_END,
};

static const struct field fuse_fields[] = {
	F_STR(C, "mountpoint", fuse.mountpoint, chk_abspath, false),
	F_BOOL(C, "allow_other", fuse.allow_other),
	F_U32(C, "uid", fuse.uid, 0, 0xFFFFFFFE),
	F_U32(C, "gid", fuse.gid, 0, 0xFFFFFFFE),
	F_END,
};

static const struct schema gateway_schema = { .fields = gateway_fields };
static const struct schema fuse_schema = { .fields = fuse_fields };

static const struct field root_fields[] = {
	F_GROUP("gateway", &gateway_schema),
	F_LIST(C, "targets", targets, nr_targets, &target_schema, false),
	F_LIST(C, "exports", exports, nr_exports, &export_schema, false),
	F_GROUP("fuse", &fuse_schema),
	F_END,
};
#undef C

static const struct schema root_schema = { .fields = root_fields };

static void config_init_defaults(struct ctx *c, struct gw_config *cfg)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	cfg->reactors = cpus < 1 ? 1 : cpus > MAX_REACTORS ? MAX_REACTORS
							   : (int)cpus;
	cfg->log_level = LOG_LVL_NOTICE;
	limits_defaults(cfg);
	cfg->reclaim = RECLAIM_OPTS_DEFAULT;
	dup_str(c, &cfg->path, c->path);
	char control[PATH_MAX];
	config_default_control(control, sizeof(control));
	dup_str(c, &cfg->control, control);
	dup_str(c, &cfg->state_dir, "/var/lib/nvmf-gateway");
	dup_str(c, &cfg->fuse.mountpoint, "/run/nvmf-gateway/fuse");
}

/* ---- the walker ---- */

static void parse_group(struct ctx *c, const config_setting_t *set,
			const char *path, const struct schema *sc, char *base);

/* Names a setting in messages ("targets[0].paths[1].tos").  Made of the
 * schema's own keys, so it never comes near PATH_LEN. */
#define PATH_LEN 256
__attribute__((format(printf, 2, 3)))
static void path_fmt(char *buf, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, PATH_LEN, fmt, ap);
	va_end(ap);
}

static void parse_enum(struct ctx *c, const config_setting_t *s,
		       const char *path, const struct choice *ch, int *dst)
{
	char expected[128] = "";
	const char *v = config_setting_get_string(s);

	for (const struct choice *i = ch; i->name; i++) {
		if (strcmp(v, i->name) == 0) {
			*dst = i->value;
			return;
		}
		size_t n = strlen(expected);
		snprintf(expected + n, sizeof(expected) - n, "%s%s",
			 n ? "|" : "", i->name);
	}
	err_at(c, s, "%s: unknown value \"%s\" (expected %s)", path, v,
	       expected);
}

static void parse_str(struct ctx *c, const config_setting_t *s,
		      const char *path, const char *(*check)(const char *),
		      char **dst)
{
	const char *v = config_setting_get_string(s);
	const char *why = check(v);

	if (why) {
		err_at(c, s, "%s: invalid value \"%s\": %s", path, v, why);
		return;
	}
	free(*dst);
	dup_str(c, dst, v);
}

static void parse_list(struct ctx *c, const config_setting_t *set,
		       const char *path, const struct field *f, char *base)
{
	const struct schema *sc = f->sub;
	size_t n = (size_t)config_setting_length(set);
	char elpath[PATH_LEN];

	if (n < sc->min_count)
		err_at(c, set, "%s: needs at least %zu entr%s", path,
		       sc->min_count, sc->min_count == 1 ? "y" : "ies");
	if (!n)
		return;
	char *arr = calloc(n, sc->elem_size);
	if (!arr) {
		c->nomem = true;
		return;
	}
	/* Hooked up before parsing so that config_free sees every element. */
	*(void **)(base + f->off) = arr;
	*(size_t *)(base + f->count_off) = n;
	for (size_t i = 0; i < n; i++)
		sc->init(c, arr + i * sc->elem_size);
	for (size_t i = 0; i < n; i++) {
		const config_setting_t *el = config_setting_get_elem(set, (unsigned)i);
		path_fmt(elpath, "%s[%zu]", path, i);
		if (!config_setting_is_group(el))
			err_type(c, el, elpath, "a group");
		else
			parse_group(c, el, elpath, sc, arr + i * sc->elem_size);
	}
}

static void parse_field(struct ctx *c, const config_setting_t *s,
			const char *path, const struct field *f, char *base)
{
	static const struct {
		int type;
		const char *name;
	} want[] = {
		[K_BOOL] = { CONFIG_TYPE_BOOL, "a boolean" },
		[K_STR] = { CONFIG_TYPE_STRING, "a string" },
		[K_ENUM] = { CONFIG_TYPE_STRING, "a string" },
		[K_GROUP] = { CONFIG_TYPE_GROUP, "a group" },
		[K_LIST] = { CONFIG_TYPE_LIST, "a list" },
	};
	void *dst = base + f->off;
	long long v;

	if (want[f->kind].name && config_setting_type(s) != want[f->kind].type) {
		err_type(c, s, path, want[f->kind].name);
		return;
	}
	switch (f->kind) {
	case K_INT:
	case K_U32:
	case K_U64:
		if (!is_int(s)) {
			err_type(c, s, path, "an integer");
			return;
		}
		if (!int_in_range(c, s, path, f->min, f->max, &v))
			return;
		if (f->kind == K_INT)
			*(int *)dst = (int)v;
		else if (f->kind == K_U32)
			*(uint32_t *)dst = (uint32_t)v;
		else
			*(uint64_t *)dst = (uint64_t)v;
		break;
	case K_BOOL:
		*(bool *)dst = config_setting_get_bool(s);
		break;
	case K_STR:
		parse_str(c, s, path, f->check, dst);
		break;
	case K_ENUM:
		parse_enum(c, s, path, f->choices, dst);
		break;
	case K_FN:
		f->parse(c, s, path, dst);
		break;
	case K_GROUP:
		parse_group(c, s, path, f->sub, base);
		break;
	case K_LIST:
		parse_list(c, s, path, f, base);
		break;
	}
}

static void parse_group(struct ctx *c, const config_setting_t *set,
			const char *path, const struct schema *sc, char *base)
{
	uint64_t seen = 0;
	char sub[PATH_LEN];
	int n = config_setting_length(set);

	for (int i = 0; i < n; i++) {
		const config_setting_t *m = config_setting_get_elem(set, (unsigned)i);
		const char *key = config_setting_name(m);
		const struct field *f = sc->fields;

		while (f->key && strcmp(f->key, key) != 0)
			f++;
		if (!f->key) {
			if (*path)
				err_at(c, m, "unknown key '%s' in %s", key, path);
			else
				err_at(c, m, "unknown top-level key '%s'", key);
			continue;
		}
		seen |= UINT64_C(1) << (f - sc->fields);
		path_fmt(sub, "%s%s%s", path, *path ? "." : "", key);
		parse_field(c, m, sub, f, base);
	}
	for (const struct field *f = sc->fields; f->key; f++)
		if (f->required && !(seen & (UINT64_C(1) << (f - sc->fields))))
			err_at(c, set, "%s: missing required key '%s'", path,
			       f->key);
}

static void release_fields(const struct schema *sc, char *base)
{
	for (const struct field *f = sc->fields; f->key; f++) {
		void *dst = base + f->off;

		switch (f->kind) {
		case K_STR:
			free(*(char **)dst);
			break;
		case K_FN:
			if (f->release)
				f->release(dst);
			break;
		case K_GROUP:
			release_fields(f->sub, base);
			break;
		case K_LIST: {
			char *arr = *(char **)dst;
			size_t n = *(size_t *)(base + f->count_off);
			for (size_t i = 0; i < n; i++)
				release_fields(f->sub, arr + i * f->sub->elem_size);
			free(arr);
			break;
		}
		default:
			break;
		}
	}
}

void config_free(struct gw_config *cfg)
{
	if (!cfg)
		return;
	release_fields(&root_schema, (char *)cfg);
	free(cfg->path);
	free(cfg);
}

/* ---- access to the listeners (nbd.access, gateway.control_access,
 * gateway.metrics_access): one group each, read by parse_access and
 * matched to its listener's kind by check_access ---- */

/* A user or group by name or number into *id; false after an error. */
static bool access_id(struct ctx *c, const config_setting_t *s, const char *path,
		      bool user, uint32_t *id)
{
	if (is_int(s)) {
		long long v;
		if (!int_in_range(c, s, path, 0, 0xFFFFFFFE, &v))
			return false;
		*id = (uint32_t)v;
		return true;
	}
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		err_type(c, s, path, user ? "a user name or uid" : "a group name or gid");
		return false;
	}
	const char *name = config_setting_get_string(s);
	if (user) {
		struct passwd *pw = getpwnam(name);
		if (pw) {
			*id = pw->pw_uid;
			return true;
		}
	} else {
		struct group *gr = getgrnam(name);
		if (gr) {
			*id = gr->gr_gid;
			return true;
		}
	}
	err_at(c, s, "%s: no such %s \"%s\"", path, user ? "user" : "group", name);
	return false;
}

/* allow_users / allow_groups / allow_from: a list or array of at most
 * GW_ACCESS_MAX entries. */
static bool access_list(struct ctx *c, const config_setting_t *s, const char *path)
{
	if (!config_setting_is_aggregate(s) || config_setting_is_group(s)) {
		err_type(c, s, path, "a list");
		return false;
	}
	if (config_setting_length(s) > GW_ACCESS_MAX) {
		err_at(c, s, "%s: at most %d entries", path, GW_ACCESS_MAX);
		return false;
	}
	return true;
}

static void parse_access(struct ctx *c, const config_setting_t *s, const char *path, void *dst)
{
	struct gw_access a = { 0 };
	char sub[PATH_LEN];

	if (!config_setting_is_group(s)) {
		err_type(c, s, path, "a group");
		return;
	}
	for (int i = 0; i < config_setting_length(s); i++) {
		const config_setting_t *m = config_setting_get_elem(s, (unsigned)i);
		const char *key = config_setting_name(m);
		path_fmt(sub, "%s.%s", path, key);
		if (strcmp(key, "mode") == 0) {
			const char *v = config_setting_type(m) == CONFIG_TYPE_STRING
						? config_setting_get_string(m) : NULL;
			char *end;
			unsigned long mode = v && *v ? strtoul(v, &end, 8) : 0;
			if (!v || !*v || *end || mode > 0777 || !(mode & 0200)) {
				err_at(c, m, "%s: expected an octal mode in quotes, up to \"0777\", "
				       "with the owner's w bit (connecting needs it)", sub);
				continue;
			}
			a.mode = (unsigned)mode;
		} else if (strcmp(key, "owner") == 0) {
			a.has_owner = access_id(c, m, sub, true, &a.owner);
		} else if (strcmp(key, "group") == 0) {
			a.has_group = access_id(c, m, sub, false, &a.group);
		} else if (strcmp(key, "allow_users") == 0 || strcmp(key, "allow_groups") == 0) {
			bool user = key[6] == 'u';
			if (!access_list(c, m, sub))
				continue;
			for (int j = 0; j < config_setting_length(m); j++) {
				char el[PATH_LEN];
				uint32_t id;
				path_fmt(el, "%s[%d]", sub, j);
				if (!access_id(c, config_setting_get_elem(m, (unsigned)j), el, user, &id))
					continue;
				if (user)
					a.uids[a.nr_uids++] = id;
				else
					a.gids[a.nr_gids++] = id;
			}
		} else if (strcmp(key, "allow_from") == 0) {
			if (!access_list(c, m, sub))
				continue;
			for (int j = 0; j < config_setting_length(m); j++) {
				const config_setting_t *e = config_setting_get_elem(m, (unsigned)j);
				char el[PATH_LEN];
				path_fmt(el, "%s[%d]", sub, j);
				if (config_setting_type(e) != CONFIG_TYPE_STRING) {
					err_type(c, e, el, "a string");
					continue;
				}
				const char *v = config_setting_get_string(e);
				if (gw_cidr_parse(v, &a.cidrs[a.nr_cidrs]))
					err_at(c, e, "%s: invalid value \"%s\": expected an IPv4 or IPv6 "
					       "address with an optional /prefix, no host bits set", el, v);
				else
					a.nr_cidrs++;
			}
		} else {
			err_at(c, m, "unknown key '%s' in %s", key, path);
		}
	}
	*(struct gw_access *)dst = a;
}

static bool access_empty(const struct gw_access *a)
{
	return !a->mode && !a->has_owner && !a->has_group && !a->nr_uids && !a->nr_gids &&
	       !a->nr_cidrs;
}

/* The rules must fit the listener they guard; then the listener carries
 * them (what gw_listen_open and the accept paths read). */
static void access_fit(struct ctx *c, const config_setting_t *s, const char *path,
		       const struct gw_access *a, struct gw_listen *l, bool unix_only)
{
	bool is_unix = l ? l->kind == GW_LISTEN_UNIX : true;

	if (access_empty(a))
		return;
	if (l && l->kind == GW_LISTEN_NONE)
		err_at(c, s, "%s: there is no listener to guard", path);
	else if (!is_unix && (a->mode || a->has_owner || a->has_group || a->nr_uids || a->nr_gids))
		err_at(c, s, "%s: mode, owner, group, allow_users and allow_groups apply to "
		       "unix: listeners only; a tcp: one takes allow_from", path);
	else if ((is_unix || unix_only) && a->nr_cidrs)
		err_at(c, s, "%s: allow_from applies to tcp: listeners only; a unix: one takes "
		       "allow_users and allow_groups", path);
	else if (l)
		l->access = *a;
}

static void check_access(struct ctx *c, struct gw_config *cfg, const config_setting_t *root)
{
	/* libconfig's lookup only reads the tree but lacks the const. */
	config_setting_t *r = (config_setting_t *)root;
	config_setting_t *s;
	char path[PATH_LEN];

	if ((s = config_setting_lookup(r, "gateway.control_access")))
		access_fit(c, s, "gateway.control_access", &cfg->control_access, NULL, true);
	if ((s = config_setting_lookup(r, "gateway.metrics_access")))
		access_fit(c, s, "gateway.metrics_access", &cfg->metrics_access, &cfg->metrics,
			   false);
	config_setting_t *exports = config_setting_get_member(r, "exports");
	for (size_t i = 0; exports && i < cfg->nr_exports; i++) {
		config_setting_t *e = config_setting_get_elem(exports, (unsigned)i);
		if (!e || !config_setting_is_group(e) || !(s = config_setting_lookup(e, "nbd.access")))
			continue;
		path_fmt(path, "exports[%zu].nbd.access", i);
		access_fit(c, s, path, &cfg->exports[i].nbd.access, &cfg->exports[i].nbd.listen,
			   false);
	}
}

/* ---- checks across objects ---- */

/* The setting at dotted KEY ("nbd.device") in element I of LIST, or NULL. */
static const config_setting_t *lookup(const config_setting_t *list, size_t i,
				      const char *key)
{
	const config_setting_t *el = config_setting_get_elem(list, (unsigned)i);

	if (!el || !config_setting_is_group(el))
		return NULL;
	/* libconfig's lookup only reads the tree but lacks the const. */
	return config_setting_lookup((config_setting_t *)el, key);
}

/* Where to point an error about KEY of element I: the key, else the element. */
static const config_setting_t *where(const config_setting_t *list, size_t i,
				     const char *key)
{
	const config_setting_t *s = lookup(list, i, key);

	return s ? s : config_setting_get_elem(list, (unsigned)i);
}

/* Reports KEY of element I of list NAME as a duplicate of that of J. */
static void err_dup(struct ctx *c, const config_setting_t *list,
		    const char *name, size_t i, size_t j, const char *key,
		    const char *what, const char *value)
{
	err_at(c, where(list, i, key),
	       "%s[%zu].%s: duplicate %s '%s' (first at line %d)", name, i, key,
	       what, value, config_setting_source_line(where(list, j, key)));
}

/* NAMES_OFF is where a char * name sits in each of the N elements of STRIDE
 * bytes at ARR, in the order of LIST. */
static void check_unique_names(struct ctx *c, const config_setting_t *list,
			       const char *list_name, const char *arr, size_t n,
			       size_t stride, size_t names_off, const char *what)
{
#define NAME(i) (*(char *const *)(arr + (i) * stride + names_off))
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; NAME(i) && j < i; j++) {
			if (NAME(j) && strcmp(NAME(i), NAME(j)) == 0) {
				err_dup(c, list, list_name, i, j, "name", what,
					NAME(i));
				break;
			}
		}
	}
#undef NAME
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

/* Reads a secret file named by KEY of target I into *secret. */
static void load_secret_file(struct ctx *c, const config_setting_t *list,
			     size_t i, const char *key, const char *file,
			     char **secret)
{
	const config_setting_t *s = where(list, i, key);
	struct nvmf_dhchap_key k;
	const char *why = NULL;
	char path[PATH_LEN], buf[256];
	ssize_t n;

	path_fmt(path, "targets[%zu].%s", i, key);
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err_at(c, s, "%s: cannot open %s: %s", path, file, strerror(errno));
		return;
	}
	if (!secret_file_private(c, s, path, file, fd)) {
		close(fd);
		return;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0) {
		err_at(c, s, "%s: cannot read %s: %s", path, file, strerror(errno));
		return;
	}
	/* One line, as nvme gen-dhchap-key > FILE writes it. */
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		n--;
	buf[n] = 0;
	if (nvmf_dhchap_key_parse(buf, &k, &why))
		err_at(c, s, "%s: %s does not hold a DH-HMAC-CHAP secret: %s", path,
		       file, why);
	else
		dup_str(c, secret, buf);
	memset(buf, 0, sizeof(buf));
}

static void check_secrets(struct ctx *c, struct gw_target *t,
			  const config_setting_t *list, size_t i)
{
	if (t->dhchap_secret_file && t->dhchap_secret)
		err_at(c, where(list, i, "dhchap_secret_file"),
		       "targets[%zu]: set dhchap_secret or dhchap_secret_file, not both", i);
	else if (t->dhchap_secret_file)
		load_secret_file(c, list, i, "dhchap_secret_file",
				 t->dhchap_secret_file, &t->dhchap_secret);
	if (t->dhchap_ctrl_secret_file && t->dhchap_ctrl_secret)
		err_at(c, where(list, i, "dhchap_ctrl_secret_file"),
		       "targets[%zu]: set dhchap_ctrl_secret or dhchap_ctrl_secret_file, not both",
		       i);
	else if (t->dhchap_ctrl_secret_file)
		load_secret_file(c, list, i, "dhchap_ctrl_secret_file",
				 t->dhchap_ctrl_secret_file, &t->dhchap_ctrl_secret);
	if ((t->dhchap_ctrl_secret || t->dhchap_ctrl_secret_file) &&
	    !t->dhchap_secret && !t->dhchap_secret_file)
		err_at(c, where(list, i, t->dhchap_ctrl_secret ? "dhchap_ctrl_secret"
							      : "dhchap_ctrl_secret_file"),
		       "targets[%zu]: the controller's secret needs the host's "
		       "(dhchap_secret or dhchap_secret_file) too", i);
}

static void check_targets(struct ctx *c, struct gw_config *cfg,
			  const config_setting_t *list)
{
	for (size_t i = 0; i < cfg->nr_targets; i++) {
		if (!cfg->targets[i].nr_io_queues)
			cfg->targets[i].nr_io_queues = cfg->reactors;
		check_secrets(c, &cfg->targets[i], list, i);
	}
	check_unique_names(c, list, "targets", (const char *)cfg->targets,
			   cfg->nr_targets, sizeof(struct gw_target),
			   offsetof(struct gw_target, name), "target name");
}

static void check_export(struct ctx *c, struct gw_config *cfg,
			 const config_setting_t *list, size_t i)
{
	struct gw_export *e = &cfg->exports[i];
	const config_setting_t *el = config_setting_get_elem(list, (unsigned)i);
	const config_setting_t *nbd = lookup(list, i, "nbd");
	char label[32], dev[32];

	if (!config_setting_is_group(el))
		return;
	if (!e->nbd.connections)
		e->nbd.connections = cfg->reactors;
	e->has_nbd = nbd && config_setting_is_group(nbd);
	if (e->has_nbd && !config_setting_get_member(nbd, "device") &&
	    !config_setting_get_member(nbd, "listen"))
		err_at(c, nbd, "exports[%zu].nbd: needs a device or a listen address",
		       i);
	snprintf(label, sizeof(label), "exports[%zu]", i);
	if (!nbd && !e->fuse)
		err_at(c, el, "export '%s' has no nbd and no fuse: nothing to export",
		       e->name ? e->name : label);
	if (e->target_name) {
		e->target = config_find_target(cfg, e->target_name);
		if (!e->target)
			err_at(c, where(list, i, "target"),
			       "exports[%zu].target: unknown target '%s'", i,
			       e->target_name);
	}
	if (e->nbd.device < 0)
		return;
	for (size_t j = 0; j < i; j++) {
		if (cfg->exports[j].nbd.device == e->nbd.device) {
			snprintf(dev, sizeof(dev), "/dev/nbd%d", e->nbd.device);
			err_dup(c, list, "exports", i, j, "nbd.device",
				"nbd device", dev);
			break;
		}
	}
}

static void check_exports(struct ctx *c, struct gw_config *cfg,
			  const config_setting_t *list)
{
	for (size_t i = 0; i < cfg->nr_exports; i++)
		check_export(c, cfg, list, i);
	check_unique_names(c, list, "exports", (const char *)cfg->exports,
			   cfg->nr_exports, sizeof(struct gw_export),
			   offsetof(struct gw_export, name), "export name");
}

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
		err_line(c, c->path, line,
			 "integer %.*s does not fit in 32 bits and libconfig would wrap it: write %.*sL",
			 len, p, len, p);
		if (grow(c, (void **)&c->wide_lines, &c->cap_wide, c->nr_wide,
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
static void scan_wide_ints(struct ctx *c, const char *p)
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
		err_line(c, f ? f : c->path, config_error_line(lc), "%s",
			 config_error_text(lc));
		return NULL;
	}
	scan_wide_ints(c, text);

	struct gw_config *cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		c->nomem = true;
		return NULL;
	}
	config_init_defaults(c, cfg);
	const config_setting_t *root = config_root_setting(lc);
	parse_group(c, root, "", &root_schema, (char *)cfg);
	check_targets(c, cfg, config_setting_get_member(root, "targets"));
	check_exports(c, cfg, config_setting_get_member(root, "exports"));
	check_access(c, cfg, root);
	return cfg;
}

int config_load(const char *path, struct gw_config **out, FILE *errs)
{
	struct ctx c = { .path = path };
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
	free(c.wide_lines);
	free(text);
	if (ret) {
		config_free(cfg);
		return ret;
	}
	*out = cfg;
	return 0;
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
	fprintf(f, "%s: OK: %zu target%s (%zu path%s), %zu export%s (%zu nbd, %zu fuse)\n",
		cfg->path, cfg->nr_targets, plural(cfg->nr_targets), paths,
		plural(paths), cfg->nr_exports, plural(cfg->nr_exports), nbd,
		fuse);
}
