/* auto_export policies (issue 19): the list's keys, which are an export's
 * keys (nbd, fuse, read_only, qos) without target and nsid, plus the
 * subsystem NQN glob, an optional nsid, and templates for the name and
 * the NBD socket; and the files of one export (or one discovered target)
 * the daemon builds from a policy at run time, so that such an export is
 * started, kept and removed by the same code as a hand-written one. */
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/parse.h"
#include "gateway/config_priv.h"
#include "nbd/kdev.h"

/* Sample values that a template is checked with when the file loads. */
#define SAMPLE_NQN "nqn.2014-08.org.example:subsystem-1"
#define SAMPLE_TARGET "target-1"

/* ---- templates ---- */

static bool put(char **o, char *end, const char *s)
{
	size_t n = strlen(s);

	if ((size_t)(end - *o) <= n)
		return false;
	memcpy(*o, s, n);
	*o += n;
	return true;
}

void config_auto_nqn_short(const char *nqn, char *out, size_t len)
{
	const char *last = strrchr(nqn, ':');
	const char *s = last && last[1] ? last + 1 : nqn;
	size_t i = 0;

	if (!len)
		return;
	for (; s[i] && i + 1 < len; i++)
		out[i] = strchr(NAME_CHARS, s[i]) ? s[i] : '_';
	out[i] = 0;
}

int config_auto_expand(const char *tmpl, const char *subnqn, uint32_t nsid, const char *tname,
		       char *out, size_t len, const char **bad)
{
	char *o = out, *end = out + len, buf[NQN_MAX + 1];

	if (!len)
		return -ENAMETOOLONG;
	for (const char *p = tmpl; *p; p++) {
		bool ok;
		if (*p != '%') {
			char ch[2] = { *p, 0 };
			ok = put(&o, end, ch);
		} else {
			switch (p[1]) {
			case 'n':
				config_auto_nqn_short(subnqn, buf, sizeof(buf));
				ok = put(&o, end, buf);
				break;
			case 'i':
				snprintf(buf, sizeof(buf), "%u", nsid);
				ok = put(&o, end, buf);
				break;
			case 't':
				ok = put(&o, end, tname);
				break;
			case '%':
				ok = put(&o, end, "%");
				break;
			default:
				if (bad)
					*bad = p;
				*o = 0;
				return -EINVAL;
			}
			p++;
		}
		if (!ok) {
			out[len - 1] = 0;
			return -ENAMETOOLONG;
		}
	}
	*o = 0;
	return 0;
}

bool config_auto_match(const struct gw_auto_export *p, const char *subnqn, uint32_t nsid)
{
	return (!p->nsid || p->nsid == nsid) && fnmatch(p->subnqn, subnqn, 0) == 0;
}

int config_auto_find(const struct gw_config *cfg, const char *subnqn, uint32_t nsid)
{
	for (size_t i = 0; i < cfg->auto_export.nr; i++)
		if (config_auto_match(&cfg->auto_export.v[i], subnqn, nsid))
			return (int)i;
	return -1;
}

/* As chk_name: "." and ".." (%n of "nqn...:..") cannot name a FUSE file,
 * and the FUSE mount refuses to start with one. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= NAME_MAX_LEN && strspn(s, NAME_CHARS) == n && strcmp(s, ".") &&
	       strcmp(s, "..");
}

/* ---- parsing ---- */

static const char *str_of(struct ctx *c, const config_setting_t *s, const char *path)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		cfg_err_type(c, s, path, "a string");
		return NULL;
	}
	return config_setting_get_string(s);
}

static bool bool_of(struct ctx *c, const config_setting_t *s, const char *path, bool *dst)
{
	if (config_setting_type(s) != CONFIG_TYPE_BOOL) {
		cfg_err_type(c, s, path, "a boolean");
		return false;
	}
	*dst = config_setting_get_bool(s);
	return true;
}

static void int_of(struct ctx *c, const config_setting_t *s, const char *path, long long lo,
		   long long hi, void *dst, size_t width)
{
	long long v;

	if (!cfg_is_int(s)) {
		cfg_err_type(c, s, path, "an integer");
		return;
	}
	if (!cfg_int_in_range(c, s, path, lo, hi, &v))
		return;
	if (width == sizeof(int))
		*(int *)dst = (int)v;
	else
		*(uint64_t *)dst = (uint64_t)v;
}

/* A rate: bytes/s as an integer or a size with a suffix ("100M"), as for
 * hand-written exports. */
static void rate_of(struct ctx *c, const config_setting_t *s, const char *path, uint64_t *dst)
{
	if (cfg_is_int(s)) {
		int_of(c, s, path, 0, LLONG_MAX, dst, sizeof(*dst));
		return;
	}
	const char *v = str_of(c, s, path);
	int ret;
	if (v && (ret = gw_parse_size(v, dst)))
		err_at(c, s, "%s: invalid value \"%s\": %s", path, v,
		       ret == -ERANGE ? "too large"
				      : "expected bytes/s with an optional K, M, G or T suffix");
}

static void unknown(struct ctx *c, const config_setting_t *m, const char *path)
{
	err_at(c, m, "unknown key '%s' in %s", config_setting_name(m), path);
}

/* A template: expanded with sample values, so an unknown %x is an
 * error of the file, never of the first namespace found. */
static bool tmpl_ok(struct ctx *c, const config_setting_t *s, const char *path, const char *v)
{
	char out[PATH_MAX];
	const char *bad = NULL;
	int ret = config_auto_expand(v, SAMPLE_NQN, 1, SAMPLE_TARGET, out, sizeof(out), &bad);

	if (ret == -EINVAL) {
		err_at(c, s, "%s: unknown template \"%%%c\" in \"%s\" (known: %%n subsystem, %%i "
		       "nsid, %%t target, %%%%)", path, bad[1] ? bad[1] : ' ', v);
		return false;
	}
	if (ret) {
		err_at(c, s, "%s: \"%s\" is too long", path, v);
		return false;
	}
	return true;
}

static void parse_nbd(struct ctx *c, const config_setting_t *g, const char *path,
		      struct gw_auto_export *p)
{
	char sub[PATH_LEN];
	int n = config_setting_length(g);
	bool dev = false;
	size_t errs = c->nr_errs;

	p->has_nbd = true;
	for (int i = 0; i < n; i++) {
		const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
		const char *key = config_setting_name(m), *v;
		cfg_path_fmt(sub, "%s.%s", path, key);
		if (!strcmp(key, "device")) {
			dev = true;
			if ((v = str_of(c, m, sub)) && strcmp(v, "auto"))
				err_at(c, m, "%s: invalid value \"%s\": a policy takes \"auto\" (one "
				       "device per namespace)", sub, v);
			else if (v)
				p->nbd_device = GW_NBD_AUTO;
		} else if (!strcmp(key, "listen")) {
			if (!(v = str_of(c, m, sub)) || !tmpl_ok(c, m, sub, v))
				continue;
			if (strncmp(v, "unix:", 5)) {
				err_at(c, m, "%s: invalid value \"%s\": a policy listens on "
				       "\"unix:PATH\" (a template: one socket per namespace)", sub, v);
				continue;
			}
			free(p->nbd_listen);
			cfg_dup_str(c, &p->nbd_listen, v);
		} else if (!strcmp(key, "connections")) {
			int_of(c, m, sub, 1, 64, &p->nbd_connections, sizeof(int));
		} else if (!strcmp(key, "max_connections")) {
			int_of(c, m, sub, 1, 65536, &p->nbd_max_connections, sizeof(int));
		} else if (!strcmp(key, "interface")) {
			if (!(v = str_of(c, m, sub)))
				continue;
			int k = 0;
			while (strcmp(nbd_kdev_iface_name(k), "?") && strcmp(nbd_kdev_iface_name(k), v))
				k++;
			if (!strcmp(nbd_kdev_iface_name(k), "?"))
				err_at(c, m, "%s: unknown value \"%s\"", sub, v);
			else
				p->nbd_iface = k;
		} else {
			unknown(c, m, path);
		}
	}
	if (!dev && !p->nbd_listen && c->nr_errs == errs)
		err_at(c, g, "%s: needs a device or a listen address", path);
}

static void parse_qos(struct ctx *c, const config_setting_t *g, const char *path,
		      struct gw_auto_export *p)
{
	static const struct {
		const char *key;
		size_t off;
		bool rate;
	} keys[] = {
		{ "iops", offsetof(struct gw_auto_export, qos_iops), false },
		{ "bandwidth", offsetof(struct gw_auto_export, qos_bandwidth), true },
		{ "read_iops", offsetof(struct gw_auto_export, qos_read_iops), false },
		{ "write_iops", offsetof(struct gw_auto_export, qos_write_iops), false },
		{ "read_bandwidth", offsetof(struct gw_auto_export, qos_read_bandwidth), true },
		{ "write_bandwidth", offsetof(struct gw_auto_export, qos_write_bandwidth), true },
	};
	char sub[PATH_LEN];
	int n = config_setting_length(g);

	for (int i = 0; i < n; i++) {
		const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
		const char *key = config_setting_name(m);
		size_t k = 0;
		while (k < sizeof(keys) / sizeof(keys[0]) && strcmp(keys[k].key, key))
			k++;
		if (k == sizeof(keys) / sizeof(keys[0])) {
			unknown(c, m, path);
			continue;
		}
		uint64_t *dst = (uint64_t *)((char *)p + keys[k].off);
		cfg_path_fmt(sub, "%s.%s", path, key);
		if (keys[k].rate)
			rate_of(c, m, sub, dst);
		else
			int_of(c, m, sub, 0, LLONG_MAX, dst, sizeof(*dst));
	}
}

static void parse_one(struct ctx *c, const config_setting_t *g, const char *path,
		      struct gw_auto_export *p)
{
	char sub[PATH_LEN];
	int n = config_setting_length(g);
	const char *v;
	size_t errs = c->nr_errs;

	for (int i = 0; i < n; i++) {
		const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
		const char *key = config_setting_name(m);
		cfg_path_fmt(sub, "%s.%s", path, key);
		if (!strcmp(key, "subnqn")) {
			if (!(v = str_of(c, m, sub)))
				continue;
			if (!*v || strlen(v) > NQN_MAX || strpbrk(v, " \t\n"))
				err_at(c, m, "%s: invalid value \"%s\": a glob of subsystem NQNs, "
				       "1-223 bytes without spaces", sub, v);
			else
				cfg_dup_str(c, &p->subnqn, v);
		} else if (!strcmp(key, "nsid")) {
			int nsid = 0;
			int_of(c, m, sub, 1, INT_MAX, &nsid, sizeof(int));
			p->nsid = (uint32_t)nsid;
		} else if (!strcmp(key, "name")) {
			if ((v = str_of(c, m, sub)) && tmpl_ok(c, m, sub, v))
				cfg_dup_str(c, &p->name, v);
		} else if (!strcmp(key, "nbd")) {
			if (config_setting_is_group(m))
				parse_nbd(c, m, sub, p);
			else
				cfg_err_type(c, m, sub, "a group");
		} else if (!strcmp(key, "fuse")) {
			bool_of(c, m, sub, &p->fuse);
		} else if (!strcmp(key, "read_only")) {
			bool_of(c, m, sub, &p->read_only);
		} else if (!strcmp(key, "qos")) {
			if (config_setting_is_group(m))
				parse_qos(c, m, sub, p);
			else
				cfg_err_type(c, m, sub, "a group");
		} else if (!strcmp(key, "tls")) {
			cfg_parse_tls_mode(c, m, sub, &p->tls);
		} else if (!strcmp(key, "tls_key_file")) {
			if (!(v = str_of(c, m, sub)))
				continue;
			if (v[0] != '/')
				err_at(c, m, "%s: invalid value \"%s\": an absolute path", sub, v);
			else
				cfg_dup_str(c, &p->tls_key_file, v);
		} else if (!strcmp(key, "tls_kdf")) {
			if (!(v = str_of(c, m, sub)))
				continue;
			if (!strcmp(v, cfg_tls_kdf_name(NVMF_TLS_KDF_COMPAT)))
				p->tls_kdf = NVMF_TLS_KDF_COMPAT;
			else if (!strcmp(v, cfg_tls_kdf_name(NVMF_TLS_KDF_RFC8446)))
				p->tls_kdf = NVMF_TLS_KDF_RFC8446;
			else
				err_at(c, m, "%s: unknown value \"%s\"", sub, v);
		} else if (!strcmp(key, "target")) {
			err_at(c, m, "%s: a policy names no target: it matches subsystems by subnqn",
			       sub);
		} else {
			unknown(c, m, path);
		}
	}
	if (!p->subnqn && c->nr_errs == errs)
		err_at(c, g, "%s: missing required key 'subnqn'", path);
	if (!p->name && c->nr_errs == errs)
		err_at(c, g, "%s: missing required key 'name'", path);
	if (!p->has_nbd && !p->fuse && c->nr_errs == errs)
		err_at(c, g, "%s: has no nbd and no fuse: nothing to export", path);
	if (c->nr_errs != errs || !p->name || !p->subnqn)
		return;
	/* Several namespaces from one policy need names (and sockets) of
	 * their own. */
	bool many = !p->nsid || strpbrk(p->subnqn, "*?[");
	if (many && !strchr(p->name, '%'))
		err_at(c, g, "%s.name: \"%s\" is the same for every namespace the policy matches: "
		       "use %%n, %%i or %%t", path, p->name);
	if (many && p->nbd_listen && !strchr(p->nbd_listen, '%'))
		err_at(c, g, "%s.nbd.listen: \"%s\" is the same for every namespace the policy "
		       "matches: use %%n, %%i or %%t", path, p->nbd_listen);
	char out[PATH_MAX];
	config_auto_expand(p->name, SAMPLE_NQN, 1, SAMPLE_TARGET, out, sizeof(out), NULL);
	if (!name_ok(out))
		err_at(c, g, "%s.name: \"%s\" gives \"%s\": use 1-64 characters of A-Z a-z 0-9 . _ -, "
		       "not \".\" or \"..\"", path, p->name, out);
}

void cfg_parse_auto(struct ctx *c, const config_setting_t *s, const char *path, void *dst)
{
	struct gw_auto_set *set = dst;
	char el[PATH_LEN];

	if (config_setting_type(s) != CONFIG_TYPE_LIST) {
		cfg_err_type(c, s, path, "a list");
		return;
	}
	size_t n = (size_t)config_setting_length(s);
	if (!n)
		return;
	set->v = calloc(n, sizeof(*set->v));
	if (!set->v) {
		c->nomem = true;
		return;
	}
	set->nr = n;
	for (size_t i = 0; i < n; i++) {
		const config_setting_t *g = config_setting_get_elem(s, (unsigned)i);
		struct gw_auto_export *p = &set->v[i];
		p->nbd_device = GW_NBD_NONE;
		p->nbd_iface = -1;
		p->tls_kdf = NVMF_TLS_KDF_COMPAT; /* as a target's */
		p->line = config_setting_source_line(g);
		cfg_path_fmt(el, "%s[%zu]", path, i);
		if (!config_setting_is_group(g))
			cfg_err_type(c, g, el, "a group");
		else
			parse_one(c, g, el, p);
	}
}

void cfg_release_auto(void *dst)
{
	struct gw_auto_set *set = dst;

	for (size_t i = 0; i < set->nr; i++) {
		free(set->v[i].subnqn);
		free(set->v[i].name);
		free(set->v[i].nbd_listen);
		free(set->v[i].tls_key_file);
		explicit_bzero(&set->v[i].tls_key, sizeof(set->v[i].tls_key));
	}
	free(set->v);
	set->v = NULL;
	set->nr = 0;
}

void cfg_check_auto(struct ctx *c, struct gw_config *cfg, const config_setting_t *list)
{
	for (size_t i = 0; i < cfg->auto_export.nr; i++) {
		struct gw_auto_export *p = &cfg->auto_export.v[i];
		const config_setting_t *el = list ? config_setting_get_elem(list, (unsigned)i) : NULL;
		if (el && config_setting_is_group(el)) {
			const config_setting_t *kt = config_setting_get_member(el, "tls");
			const config_setting_t *kf = config_setting_get_member(el, "tls_key_file");
			char label[48];
			snprintf(label, sizeof(label), "auto_export[%zu]", i);
			cfg_check_tls_key(c, cfg_setting_file(c, el),
					  (int)config_setting_source_line(kt ? kt : el),
					  (int)config_setting_source_line(kf ? kf : el), label,
					  p->tls != GW_TLS_OFF, false, p->tls_key_file, &p->tls_key, NULL);
		}
		if (!p->nbd_connections)
			p->nbd_connections = 1; /* as an export's (config_checks.c) */
		if (p->nbd_iface < 0)
			p->nbd_iface = cfg->dflt_nbd_interface;
	}
}

/* ---- the files the daemon builds ---- */

static struct gw_config *bare(const struct gw_config *cfg)
{
	struct gw_config *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->reactors = cfg->reactors;
	n->nbd_interface = cfg->nbd_interface;
	n->dflt_reactors = cfg->dflt_reactors;
	n->dflt_nbd_interface = cfg->dflt_nbd_interface;
	return n;
}

int config_auto_find_subsys(const struct gw_config *cfg, const char *subnqn)
{
	/* One target serves every nsid of the subsystem, and policies for
	 * different nsids may differ in TLS: the strictest wins (the first
	 * of equals), so that no policy's tls = "require" is served in
	 * plaintext because another matched first. */
	int best = -1;

	for (size_t i = 0; i < cfg->auto_export.nr; i++)
		if (!fnmatch(cfg->auto_export.v[i].subnqn, subnqn, 0) &&
		    (best < 0 || cfg->auto_export.v[i].tls > cfg->auto_export.v[best].tls))
			best = (int)i;
	return best;
}

struct gw_config *config_auto_target(const struct gw_config *cfg, const char *name,
				     const char *subnqn, const struct gw_auto_export *p)
{
	struct ctx c = { .path = "auto_export" };
	struct gw_config *n = bare(cfg);
	struct gw_target *t;

	if (!n || !(t = calloc(1, sizeof(*t)))) {
		free(n);
		return NULL;
	}
	n->targets = t;
	n->nr_targets = 1;
	cfg_target_init(&c, t);
	t->nr_io_queues = cfg->dflt_reactors;
	t->name = strdup(name);
	t->subnqn = strdup(subnqn);
	if (p && p->tls) {
		t->tls = p->tls;
		t->tls_kdf = p->tls_kdf;
		t->tls_key = p->tls_key;
		t->tls_key_file = p->tls_key_file ? strdup(p->tls_key_file) : NULL;
	}
	if (!t->name || !t->subnqn || (p && p->tls_key_file && p->tls && !t->tls_key_file)) {
		config_free(n);
		return NULL;
	}
	return n;
}

int config_auto_build(const struct gw_config *cfg, size_t idx, struct gw_target *tgt,
		      uint32_t nsid, struct gw_config **out, char *why, size_t whylen)
{
	const struct gw_auto_export *p = &cfg->auto_export.v[idx];
	struct gw_config *n = bare(cfg);
	struct gw_export *e;
	char name[PATH_MAX], listen[PATH_MAX];
	int ret = -ENOMEM;

	if (!n || !(e = calloc(1, sizeof(*e)))) {
		free(n);
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	n->exports = e;
	n->nr_exports = 1;
	if (config_auto_expand(p->name, tgt->subnqn, nsid, tgt->name, name, sizeof(name), NULL) ||
	    !name_ok(name)) {
		snprintf(why, whylen, "name template \"%s\" gives \"%.80s\", not a valid export name",
			 p->name, name);
		ret = -EINVAL;
		goto fail;
	}
	e->target = tgt;
	e->nsid = nsid;
	e->has_nbd = p->has_nbd;
	e->nbd.device = p->nbd_device;
	e->nbd.connections = p->nbd_connections;
	e->nbd.max_connections = p->nbd_max_connections;
	e->nbd.iface = p->nbd_iface;
	e->fuse = p->fuse;
	e->read_only = p->read_only;
	e->qos_iops = p->qos_iops;
	e->qos_bandwidth = p->qos_bandwidth;
	e->qos_read_iops = p->qos_read_iops;
	e->qos_write_iops = p->qos_write_iops;
	e->qos_read_bandwidth = p->qos_read_bandwidth;
	e->qos_write_bandwidth = p->qos_write_bandwidth;
	if (!(e->name = strdup(name)) || !(e->target_name = strdup(tgt->name))) {
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	if (p->nbd_listen) {
		if (config_auto_expand(p->nbd_listen, tgt->subnqn, nsid, tgt->name, listen,
				       sizeof(listen), NULL) ||
		    strlen(listen) - 5 >= UNIX_PATH_MAX ||
		    (ret = gw_listen_parse(listen, &e->nbd.listen)) < 0) {
			snprintf(why, whylen, "listen template \"%s\" gives \"%.120s\", not a usable "
				 "socket path", p->nbd_listen, listen);
			ret = ret == -ENOMEM ? ret : -EINVAL;
			goto fail;
		}
	}
	*out = n;
	return 0;
fail:
	config_free(n);
	return ret;
}
