/* Discovery controllers in the configuration (issue 19): nvme-cli's
 * discovery.conf lines (see discovery_conf.h), and the checks run after the
 * "discovery" list is parsed, which also read the discovery_conf file into
 * the same list. */
#include <ctype.h>
#include <errno.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gateway/base/parse.h"
#include "gateway/config_priv.h"
#include "gateway/discovery_conf.h"
#include "gateway/secret.h"
#include "transports/auth/auth.h"

enum opt_id { O_TRANSPORT, O_TRADDR, O_TRSVCID, O_HOST_TRADDR, O_HOST_IFACE, O_HOSTNQN,
	      O_SECRET, O_CTRL_SECRET, O_KATO, O_PERSISTENT, O_TLS, O_TLS_KEY,
	      O_UNSUPPORTED_ARG, O_UNSUPPORTED_FLAG, O_IGNORED_ARG, O_IGNORED_FLAG };

struct opt {
	const char *lng;
	char shrt;	/* 0: long form only */
	enum opt_id id;
};

/* nvme-cli's connect/discover options (nvme-cli 2.x fabrics.c). */
static const struct opt opts[] = {
	{ "transport", 't', O_TRANSPORT },
	{ "traddr", 'a', O_TRADDR },
	{ "trsvcid", 's', O_TRSVCID },
	{ "host-traddr", 'w', O_HOST_TRADDR },
	{ "host-iface", 'f', O_HOST_IFACE },
	{ "hostnqn", 'q', O_HOSTNQN },
	{ "dhchap-secret", 'S', O_SECRET },
	{ "dhchap-ctrl-secret", 'C', O_CTRL_SECRET },
	{ "keep-alive-tmo", 'k', O_KATO },
	{ "persistent", 'p', O_PERSISTENT },
	{ "tls", 0, O_TLS },
	/* nvme-cli 2.x: the interchange key inline; here also a key file. */
	{ "tls_key", 0, O_TLS_KEY },
	{ "tls-key", 0, O_TLS_KEY },
	/* Change which key or channel is used: refused, not ignored. */
	{ "keyring", 0, O_UNSUPPORTED_ARG },
	{ "tls_key_identity", 0, O_UNSUPPORTED_ARG },
	{ "tls-key-identity", 0, O_UNSUPPORTED_ARG },
	{ "concat", 0, O_UNSUPPORTED_FLAG },
	/* Known to nvme-cli, no meaning here. */
	{ "hostid", 'I', O_IGNORED_ARG },
	{ "nqn", 'n', O_IGNORED_ARG },
	{ "reconnect-delay", 'c', O_IGNORED_ARG },
	{ "ctrl-loss-tmo", 'l', O_IGNORED_ARG },
	{ "fast_io_fail_tmo", 'F', O_IGNORED_ARG },
	{ "nr-io-queues", 'i', O_IGNORED_ARG },
	{ "nr-write-queues", 'W', O_IGNORED_ARG },
	{ "nr-poll-queues", 'P', O_IGNORED_ARG },
	{ "queue-size", 'Q', O_IGNORED_ARG },
	{ "tos", 'T', O_IGNORED_ARG },
	{ "device", 'd', O_IGNORED_ARG },
	{ "config", 'J', O_IGNORED_ARG },
	{ "duplicate-connect", 'D', O_IGNORED_FLAG },
	{ "disable-sqflow", 0, O_IGNORED_FLAG },
	{ "hdr-digest", 'g', O_IGNORED_FLAG },
	{ "data-digest", 'G', O_IGNORED_FLAG },
	{ "quiet", 0, O_IGNORED_FLAG },
	{ "verbose", 'v', O_IGNORED_FLAG },
};

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

void discovery_entry_release(struct gw_discovery *d)
{
	free(d->traddr);
	free(d->trsvcid);
	free(d->host_traddr);
	free(d->host_iface);
	free(d->hostnqn);
	free(d->dhchap_secret);
	free(d->dhchap_ctrl_secret);
	free(d->dhchap_secret_file);
	free(d->dhchap_ctrl_secret_file);
	free(d->tls_key_file);
	d->tls_key_file = NULL;
	memset(&d->tls_key, 0, sizeof(d->tls_key));
	d->traddr = d->trsvcid = d->host_traddr = d->host_iface = d->hostnqn = NULL;
	d->dhchap_secret = d->dhchap_ctrl_secret = NULL;
	d->dhchap_secret_file = d->dhchap_ctrl_secret_file = NULL;
}

static bool printable_word(const char *v)
{
	if (!*v)
		return false;
	for (; *v; v++)
		if ((unsigned char)*v <= 0x20 || (unsigned char)*v >= 0x7f)
			return false;
	return true;
}

/* The value of option o into d. */
static int apply(const struct opt *o, const char *v, struct gw_discovery *d, char *err,
		 size_t errlen)
{
	char **dst = NULL;
	const char *why = NULL;
	uint16_t port;

	switch (o->id) {
	case O_TRANSPORT:
		if (!strcmp(v, "fc") || !strcmp(v, "loop"))
			return fail(err, errlen, "--transport=%s: not supported by the gateway "
				    "(tcp or rdma)", v);
		if (nvmf_trtype_parse(v, &d->transport))
			return fail(err, errlen, "--transport=%s: expected tcp or rdma", v);
		return 0;
	case O_TRADDR:
		dst = &d->traddr;
		break;
	case O_TRSVCID:
		if (gw_parse_port(v, &port))
			return fail(err, errlen, "--trsvcid=%s: expected a port 1..65535", v);
		char buf[8];
		snprintf(buf, sizeof(buf), "%u", port);
		v = buf;
		free(d->trsvcid);
		d->trsvcid = strdup(v);
		return d->trsvcid ? 0 : -ENOMEM;
	case O_HOST_TRADDR:
		dst = &d->host_traddr;
		break;
	case O_HOST_IFACE:
		if (strlen(v) >= IFNAMSIZ)
			return fail(err, errlen, "--host-iface=%s: an interface name is at most "
				    "15 characters", v);
		dst = &d->host_iface;
		break;
	case O_HOSTNQN:
		if (strncmp(v, "nqn.", 4) || strlen(v) > NQN_MAX)
			return fail(err, errlen, "--hostnqn=%s: not an NQN (\"nqn.\", at most "
				    "223 bytes)", v);
		dst = &d->hostnqn;
		break;
	case O_SECRET:
	case O_CTRL_SECRET: {
		struct nvmf_dhchap_key key;
		int bad = nvmf_dhchap_key_parse(v, &key, &why);
		explicit_bzero(&key, sizeof(key)); /* only the check was wanted */
		if (bad)
			return fail(err, errlen, "--%s: invalid secret: %s", o->lng, why);
		dst = o->id == O_SECRET ? &d->dhchap_secret : &d->dhchap_ctrl_secret;
		break;
	}
	case O_KATO: {
		char *end;
		long k = strtol(v, &end, 10);
		if (!*v || *end || k < 1 || k > 3600)
			return fail(err, errlen, "--keep-alive-tmo=%s: expected 1..3600 seconds", v);
		d->keep_alive_tmo = (int)k;
		return 0;
	}
	case O_TLS:
		d->tls = true;
		return 0;
	case O_TLS_KEY:
		/* Never echoed: it may be the key itself. */
		if (!strncmp(v, "NVMeTLSkey-1:", 13)) {
			if (nvmf_tls_key_parse(v, &d->tls_key, &why) < 0)
				return fail(err, errlen, "--%s: not a valid NVMe TLS key: %s", o->lng,
					    why);
			d->tls_key_inline = true;
			free(d->tls_key_file);
			d->tls_key_file = NULL;
			return 0;
		}
		if (v[0] != '/')
			return fail(err, errlen, "--%s: give the key (NVMeTLSkey-1:...) or the "
				    "absolute path of a file holding it; a keyring serial number "
				    "is not supported", o->lng);
		d->tls_key_inline = false;
		dst = &d->tls_key_file;
		break;
	case O_UNSUPPORTED_ARG:
	case O_UNSUPPORTED_FLAG:
		return fail(err, errlen, "--%s: not supported by the gateway (it changes which "
			    "TLS key or channel is used; give the key with --tls_key)", o->lng);
	case O_PERSISTENT:
	case O_IGNORED_ARG:
	case O_IGNORED_FLAG:
		return 0;
	}
	if (!printable_word(v))
		return fail(err, errlen, "--%s: empty or not printable", o->lng);
	free(*dst);
	*dst = strdup(v);
	return *dst ? 0 : -ENOMEM;
}

static bool takes_arg(const struct opt *o)
{
	return o->id != O_PERSISTENT && o->id != O_IGNORED_FLAG && o->id != O_TLS &&
	       o->id != O_UNSUPPORTED_FLAG;
}

/* Splits line (modified) into words at blanks; a word starting with '#'
 * ends the line. */
static size_t split(char *line, char **w, size_t max)
{
	size_t n = 0;
	char *save = NULL;

	for (char *t = strtok_r(line, " \t\r\n", &save); t && n < max;
	     t = strtok_r(NULL, " \t\r\n", &save)) {
		if (*t == '#')
			break;
		w[n++] = t;
	}
	return n;
}

/* A key or secret somewhere in s (the interchange formats' prefixes). */
static bool line_holds_key(const char *s)
{
	return strstr(s, "NVMeTLSkey-") || strstr(s, "DHHC-");
}

/* A word as an error message may show it: never a key (errors go to the
 * journal and to the reload's reply). */
static const char *shown(const char *a)
{
	return line_holds_key(a) ? "(a word holding a key, not shown)" : a;
}

int discovery_conf_line(const char *line, struct gw_discovery *d, char *err, size_t errlen)
{
	char buf[4096], *w[64];
	bool have_transport = false;
	int rc = 0;

	memset(d, 0, sizeof(*d));
	cfg_discovery_init(NULL, d);
	if (strlen(line) >= sizeof(buf))
		return fail(err, errlen, "line longer than %zu bytes", sizeof(buf) - 1);
	strcpy(buf, line);
	size_t n = split(buf, w, sizeof(w) / sizeof(w[0]));
	if (!n)
		return 0;
	for (size_t i = 0; i < n && !rc; i++) {
		const char *a = w[i], *v = NULL;
		const struct opt *o = NULL;

		if (a[0] == '-' && a[1] == '-') {
			const char *eq = strchr(a + 2, '=');
			size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
			for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]) && !o; k++)
				if (strlen(opts[k].lng) == len && !strncmp(opts[k].lng, a + 2, len))
					o = &opts[k];
			if (o && eq)
				v = eq + 1;
			if (o && eq && !takes_arg(o)) {
				rc = fail(err, errlen, "%s: --%s takes no value", shown(a), o->lng);
				break;
			}
		} else if (a[0] == '-' && a[1] && a[1] != '-') {
			for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]) && !o; k++)
				if (opts[k].shrt == a[1])
					o = &opts[k];
			if (o && a[2]) {
				if (!takes_arg(o)) {
					rc = fail(err, errlen, "%s: -%c takes no value", shown(a), o->shrt);
					break;
				}
				v = a + 2; /* -ttcp, as getopt reads it */
			}
		}
		if (!o) {
			rc = fail(err, errlen, "%s: %s", shown(a),
				  a[0] == '-' ? "unknown option" : "not an option");
			break;
		}
		if (takes_arg(o) && !v) {
			if (i + 1 >= n) {
				rc = fail(err, errlen, "--%s needs a value", o->lng);
				break;
			}
			v = w[++i];
		}
		have_transport |= o->id == O_TRANSPORT;
		rc = apply(o, v ? v : "", d, err, errlen);
	}
	if (!rc && !have_transport)
		rc = fail(err, errlen, "no --transport (-t)");
	if (!rc && !d->traddr)
		rc = fail(err, errlen, "no --traddr (-a)");
	if (rc) {
		if (rc == -ENOMEM)
			snprintf(err, errlen, "out of memory");
		discovery_entry_release(d);
		return rc;
	}
	return 1;
}

/* A file of one line per controller: anything larger is not one (and a
 * device such as /dev/zero would never end). */
#define DISCOVERY_CONF_MAX (1 << 20)

/* Appends the discovery_conf file's lines to cfg->discovery.  A missing
 * file is an error: it was named, so something is wrong. */
static void read_conf(struct ctx *c, struct gw_config *cfg, const char *file,
		      const config_setting_t *named)
{
	FILE *f = fopen(file, "re");
	char *line = NULL;
	size_t cap = 0, have = cfg->discovery.nr;
	int lineno = 0;

	struct stat st;
	const char *why = NULL;

	if (!f)
		why = strerror(errno);
	else if (fstat(fileno(f), &st) < 0)
		why = strerror(errno);
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (st.st_size > DISCOVERY_CONF_MAX)
		why = "larger than 1 MiB";
	if (why) {
		cfg_err_line(c, named ? cfg_setting_file(c, named) : c->path,
			     named ? config_setting_source_line(named) : 0,
			     "discovery_conf: cannot open %s: %s", file, why);
		if (f)
			fclose(f);
		return;
	}
	while (getline(&line, &cap, f) >= 0) {
		struct gw_discovery d;
		char err[512];
		lineno++;
		char problem[128];
		/* Any key in the line, wherever it stands (a later --tls_key=FILE
		 * does not take it out of the file), and DH-HMAC-CHAP secrets
		 * too: as an inline secret in the main file. */
		if (line_holds_key(line) && gw_secret_file_problem(&st, problem, sizeof(problem)))
			cfg_err_line(c, file, lineno, "%s holds a key or secret and %s; refusing it "
				     "(chmod go-rwx, or name a key file instead)", file, problem);
		int rc = discovery_conf_line(line, &d, err, sizeof(err));
		if (rc < 0) {
			cfg_err_line(c, file, lineno, "%s", err);
			continue;
		}
		if (!rc)
			continue;
		if (!cfg_grow(c, (void **)&cfg->discovery.ctrls, &have, cfg->discovery.nr,
			      sizeof(d))) {
			discovery_entry_release(&d);
			break;
		}
		d.src_file = file;
		d.src_line = lineno;
		cfg->discovery.ctrls[cfg->discovery.nr++] = d;
	}
	free(line);
	fclose(f);
}

void cfg_discovery_init(struct ctx *c, void *elem)
{
	struct gw_discovery *d = elem;

	(void)c;
	d->persistent = true;
	d->keep_alive_tmo = 30;
	d->reconnect_delay = 2;
	d->tls_kdf = NVMF_TLS_KDF_COMPAT; /* as a target's */
	/* trsvcid stays NULL until cfg_check_discovery knows the transport. */
}

static int line_of(const config_setting_t *el, const char *key)
{
	const config_setting_t *s = el ? config_setting_get_member(el, key) : NULL;

	return (int)config_setting_source_line(s ? s : el);
}

/* The TLS key of discovery[i] or of a discovery_conf line. */
static void check_tls(struct ctx *c, const config_setting_t *list, size_t i,
		      struct gw_discovery *d)
{
	const config_setting_t *el =
		!d->src_file && list ? config_setting_get_elem(list, (unsigned)i) : NULL;
	char label[PATH_LEN];

	if (d->src_file)
		snprintf(label, sizeof(label), "discovery_conf");
	else
		snprintf(label, sizeof(label), "discovery[%zu]", i);
	cfg_check_tls_key(c, d->src_file ? d->src_file : el ? cfg_setting_file(c, el) : c->path,
			  d->src_file ? d->src_line : el ? line_of(el, "tls") : 0,
			  d->src_file ? d->src_line : el ? line_of(el, "tls_key_file") : 0, label,
			  d->tls, d->tls_key_inline, d->tls_key_file, &d->tls_key,
			  d->transport != NVMF_TR_TCP ? "controllers; this one is rdma" : NULL);
}

static bool same_ctrl(const struct gw_discovery *a, const struct gw_discovery *b)
{
	return a->transport == b->transport && !strcmp(a->traddr, b->traddr) &&
	       !strcmp(a->trsvcid, b->trsvcid) &&
	       !strcmp(a->host_traddr ? a->host_traddr : "", b->host_traddr ? b->host_traddr : "") &&
	       !strcmp(a->host_iface ? a->host_iface : "", b->host_iface ? b->host_iface : "");
}

void cfg_check_discovery(struct ctx *c, struct gw_config *cfg, const config_setting_t *root)
{
	struct gw_discovery_set *s = &cfg->discovery;
	const config_setting_t *list = config_setting_get_member(root, "discovery");

	if (s->conf)
		read_conf(c, cfg, s->conf, config_setting_get_member(root, "discovery_conf"));
	/* A target without paths takes them from discovery (its subsystem
	 * NQN found in a log); without discovery it has none to take. */
	const config_setting_t *tl = config_setting_get_member(root, "targets");
	for (size_t i = 0; tl && i < cfg->nr_targets; i++) {
		const config_setting_t *el = config_setting_get_elem(tl, (unsigned)i);
		if (cfg->targets[i].nr_paths || s->nr || !el || !config_setting_is_group(el) ||
		    config_setting_get_member(el, "paths"))
			continue;
		cfg_err_line(c, cfg_setting_file(c, el), config_setting_source_line(el),
			     "targets[%zu]: missing required key 'paths'", i);
	}
	for (size_t i = 0; i < s->nr; i++) {
		struct gw_discovery *d = &s->ctrls[i];
		if (!d->src_file && list)
			cfg_check_secrets(c, list, "discovery", i, &d->dhchap_secret,
					  d->dhchap_secret_file, &d->dhchap_ctrl_secret,
					  d->dhchap_ctrl_secret_file);
		if (!d->traddr) /* its error is already reported */
			continue;
		check_tls(c, list, i, d);
		/* As nvme-cli: 8009 for tcp, 4420 for rdma. */
		if (!d->trsvcid)
			cfg_dup_str(c, &d->trsvcid, d->transport == NVMF_TR_RDMA ? "4420" : "8009");
		if (!d->trsvcid)
			return;
		for (size_t j = 0; j < i; j++) {
			if (!s->ctrls[j].traddr || !same_ctrl(&s->ctrls[j], d))
				continue;
			const config_setting_t *el =
				!d->src_file && list ? config_setting_get_elem(list, (unsigned)i) : NULL;
			const char *file = d->src_file ? d->src_file :
					   el ? cfg_setting_file(c, el) : c->path;
			int line = d->src_file ? d->src_line :
				   el ? (int)config_setting_source_line(el) : 0;
			cfg_err_line(c, file, line,
				     "discovery controller %s %s:%s listed twice (also %s)",
				     nvmf_trtype_name(d->transport), d->traddr, d->trsvcid,
				     s->ctrls[j].src_file ? "in discovery_conf" : "in discovery");
			break;
		}
	}
}
