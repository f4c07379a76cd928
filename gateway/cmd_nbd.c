/* nvmf-gateway nbd: export one namespace over NBD, in the foreground.
 * TARGET is a socket to serve (unix:PATH, tcp:HOST:PORT) or a kernel
 * device (/dev/nbdN, auto). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/config.h"
#include "gateway/base/log.h"
#include "gateway/volume/qos.h"
#include "gateway/secret.h"
#include "gateway/session.h"
#include "gateway/tools.h"
#include "nbd/kdev.h"
#include "nbd/nbd.h"

#define NBD_CLI_MAX_REACTORS (1 + SESSION_MAX_EXTRA)

struct nbd_cli {
	const char *target;
	bool kernel;
	int device; /* kernel: N of /dev/nbdN or GW_NBD_AUTO */
	struct gw_listen listen;
	struct nbd_export export;
	struct nbd_export *exports[1];
	char desc[320];
	struct nbd_server *srv;
	/* Reactors beyond the session's own, for connections only. */
	unsigned nr_reactors;
	struct reactor *reactors[NBD_CLI_MAX_REACTORS];
	struct session_extras extras;
	struct vol_qos_limits qos;
	struct reclaim_opts reclaim;
	enum nbd_kdev_iface iface;
	struct nbd_tls_opts tls_opts;
	struct nbd_tls *tls;
};

static void server_stopped(void *arg)
{
	session_finish(arg, 0);
}

static void nbd_signal(struct session *s)
{
	struct nbd_cli *n = s->priv;

	/* I/O waiting for a usable path would hold the server's stop for up
	 * to ctrl_loss_tmo (or for ever): give it the drain's few seconds.
	 * I/O waiting for QoS tokens, for the queue's token time: none. */
	if (s->vol)
		vol_drain(s->vol);
	if (n->srv) {
		struct nbd_server *srv = n->srv;
		n->srv = NULL;
		nbd_server_stop(srv, server_stopped, s);
	} else {
		session_finish(s, 0);
	}
}

/* The kernel device attach (nbd/kdev.h).  One reactor: one connection.
 * The device survives a crash for dead_conn_timeout; a restart with the
 * same NQN and namespace finds it by its backend identifier. */
#define NBD_CLI_DEAD_CONN_TIMEOUT_S 120

static struct nbd_cli_kdev {
	struct nbd_kdev *d;
	bool attaching, stop_pending;
	char backend[320];
} cli_kdev;

static void kdev_detached(void *arg)
{
	session_finish(arg, 0);
}

static void kdev_signal(struct session *s)
{
	struct nbd_kdev *d = cli_kdev.d;

	/* As for the socket server: the detach flushes the device and waits
	 * for its I/O, and writes waiting for a path (or QoS tokens) would
	 * hold it for up to ctrl_loss_tmo, or for ever with -l -1. */
	if (s->vol)
		vol_drain(s->vol);
	if (cli_kdev.attaching) {
		cli_kdev.stop_pending = true;
	} else if (d) {
		cli_kdev.d = NULL;
		nbd_kdev_detach(d, kdev_detached, s);
	}
}

static void kdev_attached(void *arg, struct nbd_kdev *d, int index)
{
	struct session *s = arg;
	struct nbd_cli *n = s->priv;

	cli_kdev.attaching = false;
	if (!d) {
		session_finish(s, 1);
		return;
	}
	cli_kdev.d = d;
	printf("nvmf-gateway: export '%s' (%llu bytes) %s /dev/nbd%d\n", n->export.name,
	       (unsigned long long)vol_size(s->vol),
	       nbd_kdev_reattached(d) ? "reattached to" : "attached as", index);
	fflush(stdout);
	if (cli_kdev.stop_pending)
		kdev_signal(s);
}

/* The namespace grew (gateway/volume, on this reactor): the device is
 * resized live, as the daemon does (gateway/daemon_ns.c).  A namespace
 * that went away or changed shape fails its I/O with EIO, logged below. */
static void cli_vol_event(struct volume *v, enum vol_event ev, bool gone, void *arg)
{
	(void)v;
	(void)gone;
	(void)arg;
	if (ev == VOL_EV_RESIZED && cli_kdev.d)
		nbd_kdev_resize(cli_kdev.d);
}

static int attach_kernel_device(struct session *s, struct nbd_cli *n)
{
	struct nbd_kdev_opts o = {
		.index = n->device,
		.connections = 1,
		.dead_conn_timeout_s = NBD_CLI_DEAD_CONN_TIMEOUT_S,
		.backend_id = cli_kdev.backend,
		.iface = n->iface,
	};
	int r;

	if (s->mem_size)
		snprintf(cli_kdev.backend, sizeof(cli_kdev.backend), "nvmf-gateway:mem/%s",
			 n->export.name);
	else
		snprintf(cli_kdev.backend, sizeof(cli_kdev.backend), "nvmf-gateway:%s/%u",
			 s->opts.subnqn, s->nsid);
	s->on_signal = kdev_signal;
	vol_set_event_cb(s->vol, cli_vol_event, NULL);
	cli_kdev.attaching = true;
	r = nbd_kdev_attach(&s->r, &n->export, &o, kdev_attached, s);
	if (r < 0)
		cli_kdev.attaching = false;
	return r;
}

static void nbd_job(struct session *s)
{
	struct nbd_cli *n = s->priv;
	struct volume *v = s->vol;
	struct nbd_server_opts o = {
		.listen = &n->listen,
		.exports = n->exports,
		.nr_exports = 1,
		.reactors = n->reactors,
		.nr_reactors = n->nr_reactors,
		.tls = n->tls,
	};

	n->export.vol = v;
	if (qos_limited(&n->qos) && vol_set_qos(v, &n->qos) < 0) {
		session_finish(s, 1);
		return;
	}
	if (s->mem_size)
		snprintf(n->desc, sizeof(n->desc), "RAM volume (nvmf-gateway --mem)");
	else
		snprintf(n->desc, sizeof(n->desc), "%s namespace %u", s->opts.subnqn, s->nsid);
	n->export.description = n->desc;
	if (n->kernel) {
		struct reactor *rp = &s->r;
		reclaim_enable(&rp, 1, 0, &n->reclaim);
		if (attach_kernel_device(s, n) < 0)
			session_finish(s, 1);
		return;
	}
	n->reactors[0] = &s->r;
	if (nbd_server_start(&o, &n->srv) < 0) {
		fprintf(stderr, "nvmf-gateway nbd: cannot serve on %s\n", n->target);
		session_finish(s, 1);
		return;
	}
	printf("nvmf-gateway: serving export '%s' (%llu bytes, %u-byte blocks%s) on %s\n",
	       n->export.name, (unsigned long long)vol_size(v), v->block_size,
	       n->export.read_only || (v->caps & VOL_CAP_READ_ONLY) ? ", read-only" : "",
	       n->target);
	fflush(stdout);
}

static void usage(void)
{
	printf("usage: nvmf-gateway nbd -t tcp -a ADDR [-s PORT] -n NQN [--nsid N]\n"
	       "                        [--name EXPORT] [--read-only] TARGET\n"
	       "       nvmf-gateway nbd --mem SIZE[:BLOCK] [--name EXPORT] [--read-only] TARGET\n\n"
	       "Exports one namespace over NBD until SIGINT/SIGTERM.  TARGET is\n"
	       "  unix:PATH            an NBD server on a Unix socket\n"
	       "  tcp:[HOST:]PORT      an NBD server on TCP (loopback unless HOST is given;\n"
	       "                       NBD has no authentication)\n"
	       "  /dev/nbdN | auto     a kernel NBD device attached by the gateway\n\n"
	       "      --name EXPORT            export name (default \"\"; \"\" always reaches it)\n"
	       "      --read-only              refuse writes\n"
	       "      --reactors N             threads serving connections (default 1)\n"
	       "      --interface I            /dev/nbdN through auto (default), netlink or\n"
	       "                               ioctl (kernels before 4.12: no reattach)\n"
	       "      --no-reclaim             a kernel device without mlockall,\n"
	       "                               PR_SET_IO_FLUSHER, oom_score_adj or nice\n"
	       "      --nice N|off             a kernel device's priority (default -20, as\n"
	       "                               the kernel's own block I/O workers)\n"
	       "      --nbd-tls on|require|off NBD_OPT_STARTTLS (sockets only; default off)\n"
	       "      --nbd-tls-psk-file FILE  TLS 1.3 PSKs, psktool format (IDENTITY:HEXKEY)\n"
	       "      --nbd-tls-certificates DIR  server-cert.pem, server-key.pem (ca-cert.pem)\n"
	       "      --nbd-tls-verify-peer    x509: require a client certificate from ca-cert.pem\n"
	       "      --nbd-tls-max-handshakes N  TLS handshakes at once (default: no limit)\n"
	       QOS_HELP SESSION_MEM_HELP SESSION_HELP);
}

int cmd_nbd(int argc, char **argv)
{
	static const struct option longopts[] = {
		SESSION_LONGOPTS,
		{ "name", required_argument, 0, 3000 },
		{ "read-only", no_argument, 0, 3001 },
		{ "mem", required_argument, 0, 3002 },
		{ "reactors", required_argument, 0, 3003 },
		{ "no-reclaim", no_argument, 0, 3004 },
		{ "interface", required_argument, 0, 3005 },
		{ "nbd-tls", required_argument, 0, 3006 },
		{ "nbd-tls-psk-file", required_argument, 0, 3007 },
		{ "nbd-tls-certificates", required_argument, 0, 3008 },
		{ "nbd-tls-verify-peer", no_argument, 0, 3009 },
		{ "nbd-tls-max-handshakes", required_argument, 0, 3010 },
		{ "nice", required_argument, 0, 3011 },
		QOS_LONGOPTS,
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct session s;
	struct nbd_cli n = { .export = { .name = "" }, .nr_reactors = 1,
			     .reclaim = RECLAIM_OPTS_DEFAULT };
	int opt, rc;
	bool no_reclaim = false;

	session_defaults(&s, "4420");
	while ((opt = getopt_long(argc, argv, SESSION_SHORTOPTS SESSION_PATH_SHORTOPTS "vh", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'h':
			usage();
			return 0;
		case 3000:
			if (strlen(optarg) > 4096) {
				fprintf(stderr, "nvmf-gateway nbd: --name: at most 4096 bytes\n");
				return 1;
			}
			n.export.name = optarg;
			break;
		case 3004:
			no_reclaim = true; /* after the loop: whatever --nice said */
			break;
		case 3011:
			if (reclaim_parse_nice(optarg, &n.reclaim) < 0) {
				fprintf(stderr, "nvmf-gateway nbd: --nice '%s': -20..19 or off\n", optarg);
				return 1;
			}
			break;
		case 3005: {
			int i = 0;
			while (strcmp(nbd_kdev_iface_name(i), "?") && strcmp(nbd_kdev_iface_name(i), optarg))
				i++;
			if (!strcmp(nbd_kdev_iface_name(i), "?")) {
				fprintf(stderr, "nvmf-gateway nbd: --interface '%s': auto, netlink or ioctl\n",
					optarg);
				return 1;
			}
			n.iface = (enum nbd_kdev_iface)i;
			break;
		}
		case 3006:
			if (!strcmp(optarg, "on"))
				n.tls_opts.mode = NBD_TLS_ON;
			else if (!strcmp(optarg, "require"))
				n.tls_opts.mode = NBD_TLS_REQUIRE;
			else if (!strcmp(optarg, "off"))
				n.tls_opts.mode = NBD_TLS_OFF;
			else {
				fprintf(stderr, "nvmf-gateway nbd: --nbd-tls '%s': on, require or off\n",
					optarg);
				return 1;
			}
			break;
		case 3007:
			n.tls_opts.psk_file = optarg;
			break;
		case 3008:
			n.tls_opts.cert_dir = optarg;
			break;
		case 3009:
			n.tls_opts.verify_peer = true;
			break;
		case 3010: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (!*optarg || *end || v < 1 || v > 4096) {
				fprintf(stderr, "nvmf-gateway nbd: --nbd-tls-max-handshakes '%s': 1 to 4096\n",
					optarg);
				return 1;
			}
			n.tls_opts.max_handshakes = (unsigned)v;
			break;
		}
		case 3001:
			s.read_only = true;
			n.export.read_only = true;
			break;
		case 3002:
			if (session_parse_mem(&s, optarg) < 0)
				return 1;
			break;
		case 3003: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (!*optarg || *end || v < 1 || v > NBD_CLI_MAX_REACTORS) {
				fprintf(stderr, "nvmf-gateway nbd: --reactors '%s': 1 to %u\n", optarg,
					NBD_CLI_MAX_REACTORS);
				return 1;
			}
			n.nr_reactors = (unsigned)v;
			break;
		}
		default:
			rc = qos_parse_opt("nbd", opt, optarg, &n.qos);
			if (rc < 0 || (!rc && session_parse_opt(&s, opt, optarg) <= 0))
				return 1;
		}
	}
	if (no_reclaim)
		n.reclaim = RECLAIM_OPTS_OFF;
	if (optind != argc - 1) {
		fprintf(stderr, "nvmf-gateway nbd: one TARGET expected (unix:PATH, tcp:HOST:PORT, "
				"/dev/nbdN or auto); see --help\n");
		return 1;
	}
	n.target = argv[optind];
	if (!strncmp(n.target, "/dev/", 5) || !strcmp(n.target, "auto")) {
		if (config_parse_nbd_device(n.target, &n.device) < 0) {
			fprintf(stderr, "nvmf-gateway nbd: '%s' is not /dev/nbdN or auto\n", n.target);
			return 1;
		}
		n.kernel = true;
	} else if (gw_listen_parse(n.target, &n.listen) < 0) {
		fprintf(stderr, "nvmf-gateway nbd: '%s': expected unix:PATH, tcp:HOST:PORT, "
				"tcp:PORT, /dev/nbdN or auto\n", n.target);
		return 1;
	}
	if (n.tls_opts.mode != NBD_TLS_OFF) {
		char err[512];
		if (n.kernel) {
			fprintf(stderr, "nvmf-gateway nbd: --nbd-tls: the kernel's NBD client has no TLS; "
					"serve a socket (unix:PATH or tcp:HOST:PORT) instead\n");
			return 1;
		}
		/* The secret half: private, as --dhchap-secret-file. */
		char key[4200], problem[160];
		const char *file = n.tls_opts.psk_file;
		struct stat st;
		if (n.tls_opts.cert_dir) {
			snprintf(key, sizeof(key), "%s/server-key.pem", n.tls_opts.cert_dir);
			file = key;
		}
		if (file && !stat(file, &st) &&
		    gw_secret_file_problem(&st, problem, sizeof(problem))) {
			fprintf(stderr, "nvmf-gateway: --nbd-tls: %s holds a secret and %s; refusing it\n",
				file, problem);
			return 1;
		}
		if (nbd_tls_new(&n.tls_opts, &n.tls, err, sizeof(err)) < 0) {
			fprintf(stderr, "nvmf-gateway nbd: --nbd-tls: %s\n", err);
			return 1;
		}
	} else if (n.tls_opts.psk_file || n.tls_opts.cert_dir) {
		fprintf(stderr, "nvmf-gateway nbd: --nbd-tls-psk-file and --nbd-tls-certificates need "
				"--nbd-tls on or --nbd-tls require\n");
		return 1;
	}
	n.exports[0] = &n.export;
	s.want_volume = true;
	s.priv = &n;
	s.on_signal = nbd_signal;
	/* The connection reactors run before the target connects, so that
	 * it has a queue on each of them: a connection's I/O stays on its
	 * own reactor (the kernel device uses reactor 0 only). */
	if (!n.kernel && n.nr_reactors > 1) {
		if (session_extras_start(&s, &n.extras, n.nr_reactors - 1, "nbd") < 0)
			return 1;
		for (unsigned i = 1; i < n.nr_reactors; i++)
			n.reactors[i] = n.extras.ptr[i - 1];
	}
	rc = session_run(&s, nbd_job);
	session_extras_free(&n.extras);
	gw_listen_free(&n.listen);
	nbd_tls_free(n.tls);
	return rc;
}
