/* What the parts of the configuration loader share (config.c loads and
 * reports, config_schema.c walks the field tables, config_checks.c checks
 * across objects, config_intscan.c finds the integers libconfig 1.5
 * wraps).  Private to gateway/config*.c. */
#ifndef GW_CONFIG_PRIV_H
#define GW_CONFIG_PRIV_H

#include <libconfig.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/un.h>

#include "gateway/config.h"

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
_Static_assert(sizeof(enum nvmf_trtype) == sizeof(int), "enum size");
_Static_assert(sizeof(enum mp_policy) == sizeof(int), "enum size");

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
	struct cfg_wide {	/* lines holding a literal libconfig wrapped */
		const char *file;
		int line;
	} *wide;
	size_t nr_wide, cap_wide;
	char **inc_files;	/* @include'd files scanned (names as written) */
	size_t nr_inc, cap_inc;
	bool nomem;
	const struct gw_config *running;	/* config_load_running, else NULL */
};

/* config.c: errors and the helpers of every part. */
bool cfg_grow(struct ctx *c, void **arr, size_t *cap, size_t n, size_t size);
__attribute__((format(printf, 4, 5)))
void cfg_err_line(struct ctx *c, const char *file, int line, const char *fmt, ...);
const char *cfg_setting_file(const struct ctx *c, const config_setting_t *s);
#define err_at(c, s, ...)                                                \
	cfg_err_line((c), cfg_setting_file((c), (s)), config_setting_source_line(s), \
		 __VA_ARGS__)
const char *cfg_type_name(int type);
void cfg_err_type(struct ctx *c, const config_setting_t *s, const char *path, const char *want);
bool cfg_is_int(const config_setting_t *s);
bool cfg_line_is_wide(const struct ctx *c, const char *file, int line);
bool cfg_int_in_range(struct ctx *c, const config_setting_t *s, const char *path, long long lo,
		      long long hi, long long *out);

/* config_schema.c: the field tables and their walker. */
#define PATH_LEN 256
__attribute__((format(printf, 2, 3)))
void cfg_path_fmt(char *buf, const char *fmt, ...);
void cfg_dup_str(struct ctx *c, char **dst, const char *s);
/* True when FILE (open as FD, or by name when FD < 0), named by setting S
 * at PATH, is private; else reports why. */
bool cfg_secret_file_private(struct ctx *c, const config_setting_t *s, const char *path,
			     const char *file, int fd);
void cfg_init_defaults(struct ctx *c, struct gw_config *cfg);
void cfg_parse_root(struct ctx *c, const config_setting_t *root, struct gw_config *cfg);
void cfg_check_access(struct ctx *c, struct gw_config *cfg, const config_setting_t *root);

/* config_checks.c */
void cfg_check_targets(struct ctx *c, struct gw_config *cfg, const config_setting_t *list);
/* The DH-HMAC-CHAP keys of LIST_NAME[I] (targets, discovery): a *_file is
 * read into its key, with the same checks as an inline one. */
void cfg_check_secrets(struct ctx *c, const config_setting_t *list, const char *list_name,
		       size_t i, char **secret, const char *secret_file, char **ctrl_secret,
		       const char *ctrl_secret_file);
void cfg_check_exports(struct ctx *c, struct gw_config *cfg, const config_setting_t *list);
/* config_nbd_tls.c: exports[i].nbd's TLS keys, nbd the group (or NULL). */
void cfg_check_nbd_tls(struct ctx *c, struct gw_export *e, const config_setting_t *nbd, size_t i);

/* discovery_conf.c: the discovery list's defaults (one element), and
 * the checks after it is parsed, which also read discovery_conf. */
void cfg_discovery_init(struct ctx *c, void *elem);
void cfg_check_discovery(struct ctx *c, struct gw_config *cfg, const config_setting_t *root);

/* config_schema.c: tls = true | false | "require" into an int (enum
 * gw_tls_mode); the tls_kdf names, indexed by enum nvmf_tls_kdf. */
void cfg_parse_tls_mode(struct ctx *c, const config_setting_t *s, const char *path, void *dst);
const char *cfg_tls_kdf_name(int v);

/* config_checks.c: the TLS key of LABEL ("targets[0]", a discovery_conf
 * line...): tls_key_file read (owner and mode checked as for a secret)
 * and parsed into *key unless the key came inline; errors at FILE, the
 * line of tls (TLS_LINE) or of tls_key_file (KEY_LINE).  TCP says whether
 * every transport it is for is tcp. */
void cfg_check_tls_key(struct ctx *c, const char *file, int tls_line, int key_line,
		       const char *label, bool tls, bool inline_key, const char *key_file,
		       struct nvmf_tls_key *key, const char *not_tcp);

/* config_schema.c: a target's defaults (discovered targets use them too). */
void cfg_target_init(struct ctx *c, void *elem);

/* config_auto.c: the auto_export list (its own keys), its release, and
 * the checks once the gateway keys are known. */
void cfg_parse_auto(struct ctx *c, const config_setting_t *s, const char *path, void *dst);
void cfg_release_auto(void *dst);
void cfg_check_auto(struct ctx *c, struct gw_config *cfg, const config_setting_t *list);

/* config_intscan.c: records in c->wide the lines of TEXT (the main file)
 * and of the files it @includes holding an integer literal that libconfig
 * 1.5 wrapped, and reports them. */
void cfg_scan_wide_ints(struct ctx *c, const char *text);
/* Frees what the scan kept (c->wide, c->inc_files): after the errors,
 * which may name an included file, are reported. */
void cfg_scan_free(struct ctx *c);

#endif
