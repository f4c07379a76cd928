/* The configuration's schema: one field table per group (key, kind, where
 * the value goes, range or check) and the walker that applies them to the
 * libconfig tree, so types, ranges, unknown keys and required keys are
 * handled the same way everywhere; the listeners' access groups. */
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

#include "gateway/base/reactor.h"
#include "gateway/base/membudget.h"
#include "gateway/base/parse.h"
#include "gateway/config_priv.h"
#include "gateway/secret.h"
#include "nbd/kdev.h"
#include "nbd/nbd.h"
#include "transports/auth/auth.h"

/* ---- string checks: NULL, or why the value is wrong ---- */

static const char *chk_name(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > NAME_MAX_LEN || strspn(s, NAME_CHARS) != n)
		return "use 1-64 characters of A-Z a-z 0-9 . _ -";
	/* An export's FUSE file takes its name: no file is called "." or "..". */
	if (!strcmp(s, ".") || !strcmp(s, ".."))
		return "\".\" and \"..\" are not names (they cannot name a file)";
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


/* ---- the schema ---- */

enum kind {
	K_INT,		/* int */
	K_U32,		/* uint32_t */
	K_U64,		/* uint64_t */
	K_BOOL,		/* bool */
	K_STR,		/* char *, strdup'ed */
	K_ENUM,		/* an enum, from a string .name gives */
	K_FN,		/* .parse decides */
	K_GROUP,	/* .sub, stored into the same object */
	K_LIST,		/* of groups: .sub, array at .off, count at .count_off */
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
	/* K_ENUM: the name of each value from 0 up, "?" past the last (the
	 * enum's own name table, so a value has one name everywhere). */
	const char *(*name)(int v);
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
	{ .key = k, .kind = K_ENUM, .off = offsetof(T, m), .name = ch,      \
	  .required = req }
#define F_FN(T, k, m, CT, fn, rel)                                      \
	{ .key = k, .kind = K_FN, .off = OFF(T, m, CT), .parse = fn,        \
	  .release = rel }
#define F_GROUP(k, s) { .key = k, .kind = K_GROUP, .sub = s }
#define F_LIST(T, k, m, cnt, s, req)                                    \
	{ .key = k, .kind = K_LIST, .off = offsetof(T, m),                  \
	  .count_off = OFF(T, cnt, size_t), .sub = s, .required = req }
#define F_END { .key = NULL }

void cfg_dup_str(struct ctx *c, char **dst, const char *s)
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
		cfg_err_type(c, s, path, "a string");
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

	if (cfg_is_int(s)) {
		if (!cfg_int_in_range(c, s, path, 1, UINT16_MAX, &v))
			return;
		port = (uint16_t)v;
	} else if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		if (gw_parse_port(config_setting_get_string(s), &port)) {
			err_at(c, s, "%s: invalid value \"%s\": expected a port 1..65535",
			       path, config_setting_get_string(s));
			return;
		}
	} else {
		cfg_err_type(c, s, path, "a string or an integer");
		return;
	}
	/* One spelling whichever way it was written. */
	snprintf(buf, sizeof(buf), "%u", port);
	free(*(char **)dst);
	cfg_dup_str(c, dst, buf);
}

static void parse_bandwidth(struct ctx *c, const config_setting_t *s,
			    const char *path, void *dst)
{
	long long v;

	if (cfg_is_int(s)) {
		if (cfg_int_in_range(c, s, path, 0, LLONG_MAX, &v))
			*(uint64_t *)dst = (uint64_t)v;
	} else if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		const char *str = config_setting_get_string(s);
		int ret = gw_parse_size(str, dst);
		if (ret)
			err_at(c, s, "%s: invalid value \"%s\": %s", path, str,
			       ret == -ERANGE ? "too large"
					      : "expected bytes/s with an optional K, M, G or T suffix");
	} else {
		cfg_err_type(c, s, path, "a string or an integer");
	}
}

/* Memory and connections: the buffer budget is a size ("256M") or bytes,
 * at least MEMBUDGET_MIN_BYTES. */
static void parse_budget(struct ctx *c, const config_setting_t *s,
			 const char *path, void *dst)
{
	uint64_t v = 0;
	long long i;

	if (cfg_is_int(s)) {
		if (!cfg_int_in_range(c, s, path, MEMBUDGET_MIN_BYTES, LLONG_MAX, &i))
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
		cfg_err_type(c, s, path, "a string or an integer");
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
		cfg_err_type(c, s, path, "a string");
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
		cfg_err_type(c, s, path, "a string");
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
bool cfg_secret_file_private(struct ctx *c, const config_setting_t *s,
				const char *path, const char *file, int fd)
{
	struct stat st;
	char problem[128];

	if ((fd >= 0 ? fstat(fd, &st) : stat(file, &st)) < 0) {
		err_at(c, s, "%s: cannot stat %s: %s", path, file, strerror(errno));
		return false;
	}
	/* A FIFO would block whoever opens it next (reactor 0, at a reload). */
	if (!S_ISREG(st.st_mode)) {
		err_at(c, s, "%s: %s is not a regular file; refusing it", path, file);
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
		cfg_err_type(c, s, path, "a string");
		return;
	}
	const char *v = config_setting_get_string(s);
	int bad = nvmf_dhchap_key_parse(v, &key, &why);
	/* Only the check was wanted: the decoded key goes (a dead store to
	 * the compiler, hence explicit_bzero). */
	explicit_bzero(&key, sizeof(key));
	if (bad) {
		err_at(c, s, "%s: invalid secret: %s", path, why);
		return;
	}
	if (!cfg_secret_file_private(c, s, path, cfg_setting_file(c, s), -1))
		return;
	free(*(char **)dst);
	cfg_dup_str(c, dst, v);
}

static parse_fn parse_access;

static const char *transports(int v)
{
	return nvmf_trtype_name((enum nvmf_trtype)v);
}

/* Indexed by enum nvmf_tls_kdf. */
const char *cfg_tls_kdf_name(int v)
{
	return v == NVMF_TLS_KDF_RFC8446 ? "rfc8446" : v == NVMF_TLS_KDF_COMPAT ? "compat" : "?";
}

/* tls of a target: true, false, or "require" (enum gw_tls_mode). */
void cfg_parse_tls_mode(struct ctx *c, const config_setting_t *s, const char *path, void *dst)
{
	int *mode = dst;

	if (config_setting_type(s) == CONFIG_TYPE_BOOL) {
		*mode = config_setting_get_bool(s) ? GW_TLS_ON : GW_TLS_OFF;
		return;
	}
	if (config_setting_type(s) == CONFIG_TYPE_STRING &&
	    !strcmp(config_setting_get_string(s), "require")) {
		*mode = GW_TLS_REQUIRE;
		return;
	}
	if (config_setting_type(s) == CONFIG_TYPE_STRING)
		err_at(c, s, "%s: invalid value \"%s\": true, false or \"require\"", path,
		       config_setting_get_string(s));
	else
		cfg_err_type(c, s, path, "true, false or \"require\"");
	/* Meant as on: the key's own checks still run, without a second
	 * error saying tls is not set. */
	*mode = GW_TLS_ON;
}

static const char *multipaths(int v)
{
	return mp_policy_name((enum mp_policy)v);
}

static void path_init(struct ctx *c, void *elem)
{
	struct gw_path *p = elem;

	p->tos = -1;
	p->tls = -1;
	cfg_dup_str(c, &p->trsvcid, "4420");
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

void cfg_target_init(struct ctx *c, void *elem)
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
	t->multipath = MP_FAILOVER;
	t->connect_loss_tmo = -1; /* wait for a target that is not up yet */
	/* What nvme-cli 2.13's check-tls-key --insert puts into nvmet's
	 * keyring (tests/interop/TLS.md): the key a kernel target holds. */
	t->tls_kdf = NVMF_TLS_KDF_COMPAT;
}

#define T struct gw_target
static const struct field target_fields[] = {
	F_STR(T, "name", name, chk_name, true),
	F_STR(T, "subnqn", subnqn, chk_nqn, true),
	/* Optional only with discovery: cfg_check_discovery says so. */
	F_LIST(T, "paths", paths, nr_paths, &path_schema, false),
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
	F_FN(T, "tls", tls, int, cfg_parse_tls_mode, NULL),
	F_STR(T, "tls_key_file", tls_key_file, chk_abspath, false),
	F_ENUM(T, "tls_kdf", tls_kdf, cfg_tls_kdf_name, false),
	/* waiting for a target at start (issue 19) */
	F_INT(T, "connect_loss_tmo", connect_loss_tmo, -1, 86400),
	F_END,
};
#undef T

static const struct schema target_schema = {
	.fields = target_fields, .elem_size = sizeof(struct gw_target),
	.init = cfg_target_init,
};

#define E struct gw_export
static const struct field nbd_fields[] = {
	F_FN(E, "device", nbd.device, int, parse_nbd_device, NULL),
	F_FN(E, "listen", nbd.listen, struct gw_listen, parse_listen,
	     release_listen),
	F_INT(E, "connections", nbd.connections, 1, 64),
	F_FN(E, "access", nbd.access, struct gw_access, parse_access, NULL),
	F_INT(E, "max_connections", nbd.max_connections, 1, 65536),
	F_ENUM(E, "interface", nbd.iface, nbd_kdev_iface_name, false),
	/* NBD over TLS: checked together by cfg_check_nbd_tls */
	F_ENUM(E, "tls", nbd.tls, nbd_tls_mode_name, false),
	F_STR(E, "tls_psk_file", nbd.tls_psk_file, chk_abspath, false),
	F_STR(E, "tls_certificates", nbd.tls_certificates, chk_abspath, false),
	F_BOOL(E, "tls_verify_peer", nbd.tls_verify_peer),
	F_INT(E, "tls_max_handshakes", nbd.tls_max_handshakes, 1, 4096),
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
	/* nbd.connections stays 0 until check_exports gives it its default. */
	e->nsid = 1;
	e->nbd.device = GW_NBD_NONE;
	e->nbd.iface = -1; /* gateway.nbd_interface unless set */
}

static const struct schema export_schema = {
	.fields = export_fields, .elem_size = sizeof(struct gw_export),
	.init = export_init,
};

#define C struct gw_config
static const struct field gateway_fields[] = {
	F_INT(C, "reactors", reactors, 1, MAX_REACTORS),
	F_ENUM(C, "reactor_backend", reactor_backend, reactor_backend_mode_name, false),
	F_INT(C, "poll_us", poll_us, 0, REACTOR_MAX_POLL_US),
	F_ENUM(C, "nbd_interface", nbd_interface, nbd_kdev_iface_name, false),
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
	F_INT(C, "nice", reclaim.nice, -20, 19),
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

/* ---- discovery controllers (issue 19); discovery_conf lines are read
 * by config_discovery.c with the same defaults ---- */

#define D struct gw_discovery
static const struct field discovery_fields[] = {
	F_ENUM(D, "transport", transport, transports, true),
	F_STR(D, "traddr", traddr, chk_word, true),
	F_FN(D, "trsvcid", trsvcid, char *, parse_trsvcid, release_str),
	F_STR(D, "host_traddr", host_traddr, chk_word, false),
	F_STR(D, "host_iface", host_iface, chk_ifname, false),
	F_STR(D, "hostnqn", hostnqn, chk_nqn, false),
	F_BOOL(D, "persistent", persistent),
	F_INT(D, "keep_alive_tmo", keep_alive_tmo, 1, 3600),
	F_INT(D, "reconnect_delay", reconnect_delay, 1, 3600),
	F_FN(D, "dhchap_secret", dhchap_secret, char *, parse_secret, release_str),
	F_FN(D, "dhchap_ctrl_secret", dhchap_ctrl_secret, char *, parse_secret, release_str),
	F_STR(D, "dhchap_secret_file", dhchap_secret_file, chk_abspath, false),
	F_STR(D, "dhchap_ctrl_secret_file", dhchap_ctrl_secret_file, chk_abspath, false),
	F_BOOL(D, "tls", tls),
	F_STR(D, "tls_key_file", tls_key_file, chk_abspath, false),
	F_ENUM(D, "tls_kdf", tls_kdf, cfg_tls_kdf_name, false),
	F_END,
};
#undef D

static const struct schema discovery_schema = {
	.fields = discovery_fields, .elem_size = sizeof(struct gw_discovery),
	.init = cfg_discovery_init,
};

static const struct field root_fields[] = {
	F_GROUP("gateway", &gateway_schema),
	F_LIST(C, "targets", targets, nr_targets, &target_schema, false),
	F_LIST(C, "exports", exports, nr_exports, &export_schema, false),
	F_GROUP("fuse", &fuse_schema),
	F_LIST(C, "discovery", discovery.ctrls, discovery.nr, &discovery_schema, false),
	F_STR(C, "discovery_conf", discovery.conf, chk_abspath, false),
	F_FN(C, "auto_export", auto_export, struct gw_auto_set, cfg_parse_auto, cfg_release_auto),
	F_END,
};
#undef C

static const struct schema root_schema = { .fields = root_fields };

void cfg_init_defaults(struct ctx *c, struct gw_config *cfg)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	cfg->reactors = cpus < 1 ? 1 : cpus > MAX_REACTORS ? MAX_REACTORS
							   : (int)cpus;
	cfg->log_level = LOG_LVL_NOTICE;
	limits_defaults(cfg);
	cfg->reclaim = RECLAIM_OPTS_DEFAULT;
	cfg_dup_str(c, &cfg->path, c->path);
	char control[PATH_MAX];
	config_default_control(control, sizeof(control));
	cfg_dup_str(c, &cfg->control, control);
	cfg_dup_str(c, &cfg->state_dir, "/var/lib/nvmf-gateway");
	cfg_dup_str(c, &cfg->fuse.mountpoint, "/run/nvmf-gateway/fuse");
}

/* ---- the walker ---- */

static void parse_group(struct ctx *c, const config_setting_t *set,
			const char *path, const struct schema *sc, char *base);

/* Names a setting in messages ("targets[0].paths[1].tos").  Made of the
 * schema's own keys, so it never comes near PATH_LEN. */
__attribute__((format(printf, 2, 3)))
void cfg_path_fmt(char *buf, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, PATH_LEN, fmt, ap);
	va_end(ap);
}

static void parse_enum(struct ctx *c, const config_setting_t *s,
		       const char *path, const char *(*name)(int), int *dst)
{
	char expected[128] = "";
	const char *v = config_setting_get_string(s);

	for (int i = 0; strcmp(name(i), "?") != 0; i++) {
		if (strcmp(v, name(i)) == 0) {
			*dst = i;
			return;
		}
		size_t n = strlen(expected);
		snprintf(expected + n, sizeof(expected) - n, "%s%s",
			 n ? "|" : "", name(i));
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
	cfg_dup_str(c, dst, v);
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
		cfg_path_fmt(elpath, "%s[%zu]", path, i);
		if (!config_setting_is_group(el))
			cfg_err_type(c, el, elpath, "a group");
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
		cfg_err_type(c, s, path, want[f->kind].name);
		return;
	}
	switch (f->kind) {
	case K_INT:
	case K_U32:
	case K_U64:
		if (!cfg_is_int(s)) {
			cfg_err_type(c, s, path, "an integer");
			return;
		}
		if (!cfg_int_in_range(c, s, path, f->min, f->max, &v))
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
		parse_enum(c, s, path, f->name, dst);
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
		cfg_path_fmt(sub, "%s%s%s", path, *path ? "." : "", key);
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

void cfg_parse_root(struct ctx *c, const config_setting_t *root, struct gw_config *cfg)
{
	parse_group(c, root, "", &root_schema, (char *)cfg);
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
	if (cfg_is_int(s)) {
		long long v;
		if (!cfg_int_in_range(c, s, path, 0, 0xFFFFFFFE, &v))
			return false;
		*id = (uint32_t)v;
		return true;
	}
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		cfg_err_type(c, s, path, user ? "a user name or uid" : "a group name or gid");
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
		cfg_err_type(c, s, path, "a list");
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
		cfg_err_type(c, s, path, "a group");
		return;
	}
	for (int i = 0; i < config_setting_length(s); i++) {
		const config_setting_t *m = config_setting_get_elem(s, (unsigned)i);
		const char *key = config_setting_name(m);
		cfg_path_fmt(sub, "%s.%s", path, key);
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
				cfg_path_fmt(el, "%s[%d]", sub, j);
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
				cfg_path_fmt(el, "%s[%d]", sub, j);
				if (config_setting_type(e) != CONFIG_TYPE_STRING) {
					cfg_err_type(c, e, el, "a string");
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

void cfg_check_access(struct ctx *c, struct gw_config *cfg, const config_setting_t *root)
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
		cfg_path_fmt(path, "exports[%zu].nbd.access", i);
		access_fit(c, s, path, &cfg->exports[i].nbd.access, &cfg->exports[i].nbd.listen,
			   false);
	}
}
