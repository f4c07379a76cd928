/* Checks that span objects, run on the structs once the schema has filled
 * them: duplicate names, export -> target, nbd devices, secrets read from
 * their files. */
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
#include "gateway/secret.h"
#include "transports/auth/auth.h"

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

/* Reads a secret file named by KEY of LIST_NAME[I] into *secret. */
static void load_secret_file(struct ctx *c, const config_setting_t *list,
			     const char *list_name, size_t i, const char *key,
			     const char *file, char **secret)
{
	const config_setting_t *s = where(list, i, key);
	struct nvmf_dhchap_key k;
	const char *why = NULL;
	char path[PATH_LEN], buf[256];
	struct stat st;
	ssize_t n;

	cfg_path_fmt(path, "%s[%zu].%s", list_name, i, key);
	/* Loaded again at a reload, on reactor 0: a FIFO there must neither
	 * block the open (O_NONBLOCK) nor the read (refused). */
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		err_at(c, s, "%s: cannot open %s: %s", path, file, strerror(errno));
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		err_at(c, s, "%s: %s is not a regular file; refusing it", path, file);
		close(fd);
		return;
	}
	if (!cfg_secret_file_private(c, s, path, file, fd)) {
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
		cfg_dup_str(c, secret, buf);
	explicit_bzero(buf, sizeof(buf));
	explicit_bzero(&k, sizeof(k));
}

/* The DH-HMAC-CHAP keys of one entry of a targets or discovery list: each
 * given inline or from a file, not both; the controller's needs the host's. */
void cfg_check_secrets(struct ctx *c, const config_setting_t *list, const char *list_name,
		       size_t i, char **secret, const char *secret_file, char **ctrl_secret,
		       const char *ctrl_secret_file)
{
	if (secret_file && *secret)
		err_at(c, where(list, i, "dhchap_secret_file"),
		       "%s[%zu]: set dhchap_secret or dhchap_secret_file, not both", list_name, i);
	else if (secret_file)
		load_secret_file(c, list, list_name, i, "dhchap_secret_file", secret_file, secret);
	if (ctrl_secret_file && *ctrl_secret)
		err_at(c, where(list, i, "dhchap_ctrl_secret_file"),
		       "%s[%zu]: set dhchap_ctrl_secret or dhchap_ctrl_secret_file, not both",
		       list_name, i);
	else if (ctrl_secret_file)
		load_secret_file(c, list, list_name, i, "dhchap_ctrl_secret_file",
				 ctrl_secret_file, ctrl_secret);
	if ((*ctrl_secret || ctrl_secret_file) && !*secret && !secret_file)
		/* The key as written: a file's key was read in by now. */
		err_at(c, where(list, i, ctrl_secret_file ? "dhchap_ctrl_secret_file"
							  : "dhchap_ctrl_secret"),
		       "%s[%zu]: the controller's secret needs the host's "
		       "(dhchap_secret or dhchap_secret_file) too", list_name, i);
}

void cfg_check_tls_key(struct ctx *c, const char *file, int tls_line, int key_line,
		       const char *label, bool tls, bool inline_key, const char *key_file,
		       struct nvmf_tls_key *key, const char *not_tcp)
{
	char buf[256], why[PATH_MAX + 128];
	const char *bad = NULL;

	if ((key_file || inline_key) && !tls) {
		cfg_err_line(c, file, key_line, "%s: tls_key_file is set but tls is not true", label);
		return;
	}
	if (!tls)
		return;
	if (!key_file && !inline_key) {
		cfg_err_line(c, file, tls_line, "%s: tls = true needs tls_key_file", label);
		return;
	}
	if (not_tcp) {
		cfg_err_line(c, file, tls_line, "%s: tls is for tcp %s", label, not_tcp);
		return;
	}
	if (inline_key)
		return; /* parsed where it was read */
	if (gw_secret_read_conf_file(key_file, buf, sizeof(buf), why, sizeof(why)) < 0) {
		cfg_err_line(c, file, key_line, "%s.tls_key_file: %s", label, why);
	} else if (nvmf_tls_key_parse(buf, key, &bad) < 0) {
		cfg_err_line(c, file, key_line, "%s.tls_key_file: %s does not hold an NVMe TLS key: %s",
			     label, key_file, bad);
	}
	explicit_bzero(buf, sizeof(buf));
}

static int line_of(const config_setting_t *s)
{
	return s ? (int)config_setting_source_line(s) : 0;
}

/* tls and tls_key_file of targets[i]; TLS is for tcp paths only. */
static void check_tls(struct ctx *c, const config_setting_t *list, size_t i,
		      struct gw_target *t)
{
	char label[48], nt[96] = "";
	const config_setting_t *s = where(list, i, "tls");

	for (size_t p = 0; p < t->nr_paths && !nt[0]; p++)
		if (t->paths[p].transport != NVMF_TR_TCP)
			snprintf(nt, sizeof(nt), "paths; paths[%zu] is %s", p,
				 nvmf_trtype_name(t->paths[p].transport));
	snprintf(label, sizeof(label), "targets[%zu]", i);
	cfg_check_tls_key(c, cfg_setting_file(c, s), line_of(s),
			  line_of(where(list, i, "tls_key_file")), label, t->tls != GW_TLS_OFF,
			  false, t->tls_key_file, &t->tls_key, nt[0] ? nt : NULL);
}

void cfg_check_targets(struct ctx *c, struct gw_config *cfg,
			  const config_setting_t *list)
{
	for (size_t i = 0; i < cfg->nr_targets; i++) {
		check_tls(c, list, i, &cfg->targets[i]);
		if (!cfg->targets[i].nr_io_queues)
			cfg->targets[i].nr_io_queues = cfg->dflt_reactors;
		cfg_check_secrets(c, list, "targets", i, &cfg->targets[i].dhchap_secret,
				  cfg->targets[i].dhchap_secret_file,
				  &cfg->targets[i].dhchap_ctrl_secret,
				  cfg->targets[i].dhchap_ctrl_secret_file);
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
	/* One: the kernel's request timeout (nbd/kdev.h) waits with the
	 * gateway on one connection only. */
	if (!e->nbd.connections)
		e->nbd.connections = 1;
	if (e->nbd.iface < 0)
		e->nbd.iface = cfg->dflt_nbd_interface;
	e->has_nbd = nbd && config_setting_is_group(nbd);
	cfg_check_nbd_tls(c, e, e->has_nbd ? nbd : NULL, i);
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

void cfg_check_exports(struct ctx *c, struct gw_config *cfg,
			  const config_setting_t *list)
{
	for (size_t i = 0; i < cfg->nr_exports; i++)
		check_export(c, cfg, list, i);
	check_unique_names(c, list, "exports", (const char *)cfg->exports,
			   cfg->nr_exports, sizeof(struct gw_export),
			   offsetof(struct gw_export, name), "export name");
}
