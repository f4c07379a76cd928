#include "gateway/session.h"

#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "gateway/config.h"
#include "gateway/base/parse.h"
#include "gateway/base/log.h"
#include "gateway/secret.h"

void session_defaults(struct session *s, const char *default_port)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->opts.name, sizeof(s->opts.name), "cli");
	s->opts.path.trtype = NVMF_TR_TCP;
	s->opts.path.tos = -1;
	s->opts.path.tls_kdf = NVMF_TLS_KDF_COMPAT;
	snprintf(s->opts.path.trsvcid, sizeof(s->opts.path.trsvcid), "%s", default_port);
	s->opts.nr_io_queues = 1;
	s->opts.queue_size = 128;
	s->opts.kato_ms = 5000;
	s->opts.io_timeout_ms = 30000;
	s->nsid = 1;
	s->sfd = -1;
	s->reconnect_delay_s = 10;
	s->ctrl_loss_tmo_s = 600;
	s->fast_io_fail_tmo_s = -1;
}

static int parse_uint(const char *arg, unsigned long max, unsigned long *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(arg, &end, 0);
	if (errno || !*arg || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

/* --dhchap-secret-file, --dhchap-ctrl-secret-file: 1, or -1 after a
 * message. */
static int session_secret_file(struct session *s, bool host, const char *file)
{
	const char *name = host ? "dhchap-secret-file" : "dhchap-ctrl-secret-file";
	struct nvmf_dhchap_key *k = host ? &s->opts.dhchap_key : &s->opts.dhchap_ctrl_key;
	char buf[256], why[PATH_MAX + 128];
	const char *bad = NULL;
	int ret = gw_secret_read_file(file, buf, sizeof(buf), why, sizeof(why));

	if (ret == 0 && nvmf_dhchap_key_parse(buf, k, &bad) < 0) {
		snprintf(why, sizeof(why), "%s does not hold a DH-HMAC-CHAP secret: %s", file, bad);
		ret = -EINVAL;
	}
	explicit_bzero(buf, sizeof(buf));
	if (ret < 0) {
		fprintf(stderr, "nvmf-gateway: --%s: %s\n", name, why);
		return -1;
	}
	return 1;
}

/* --tls-key-file: 1, or -1 after a message. */
static int session_tls_key_file(struct session *s, const char *file)
{
	char buf[256], why[PATH_MAX + 128];
	const char *bad = NULL;
	int ret = gw_secret_read_file(file, buf, sizeof(buf), why, sizeof(why));

	if (ret == 0 && nvmf_tls_key_parse(buf, &s->opts.path.tls_key, &bad) < 0) {
		snprintf(why, sizeof(why), "%s does not hold an NVMe TLS key: %s", file, bad);
		ret = -EINVAL;
	}
	explicit_bzero(buf, sizeof(buf));
	if (ret < 0) {
		fprintf(stderr, "nvmf-gateway: --tls-key-file: %s\n", why);
		return -1;
	}
	return 1;
}

/* A secret neither option gave, from the environment: 0, or -1 after a
 * message. */
static int session_secret_env(struct nvmf_dhchap_key *k, const char *var)
{
	char buf[256];
	const char *why = NULL;
	int ret = 0;

	if (!gw_secret_from_env(var, buf, sizeof(buf)))
		return 0;
	if (!k->len && nvmf_dhchap_key_parse(buf, k, &why) < 0) {
		fprintf(stderr, "nvmf-gateway: $%s: invalid secret: %s\n", var, why);
		ret = -1;
	}
	explicit_bzero(buf, sizeof(buf));
	return ret;
}

int session_parse_opt(struct session *s, int opt, const char *arg)
{
	unsigned long v;
	uint64_t sz;

	switch (opt) {
	case 't':
		if (nvmf_trtype_parse(arg, &s->opts.path.trtype) < 0) {
			fprintf(stderr, "nvmf-gateway: unknown transport '%s' (tcp or rdma)\n", arg);
			return -1;
		}
		return 1;
	case 'a':
		snprintf(s->opts.path.traddr, sizeof(s->opts.path.traddr), "%s", arg);
		return 1;
	case 's':
		snprintf(s->opts.path.trsvcid, sizeof(s->opts.path.trsvcid), "%s", arg);
		return 1;
	case 'n':
		snprintf(s->opts.subnqn, sizeof(s->opts.subnqn), "%s", arg);
		return 1;
	case 'q':
		s->hostnqn = arg;
		return 1;
	case 'I':
		s->hostid = arg;
		return 1;
	case 'g':
		s->opts.path.hdr_digest = true;
		return 1;
	case 'G':
		s->opts.path.data_digest = true;
		return 1;
	case 'v':
		log_set_level(LOG_LVL_DEBUG);
		return 1;
	case 'o':
		if (strcmp(arg, "json") && strcmp(arg, "normal")) {
			fprintf(stderr, "nvmf-gateway: output format '%s': normal or json\n", arg);
			return -1;
		}
		s->json = strcmp(arg, "json") == 0;
		return 1;
	case 'S':
	case 'C': {
		const char *why = NULL;
		struct nvmf_dhchap_key *k = opt == 'S' ? &s->opts.dhchap_key
							: &s->opts.dhchap_ctrl_key;
		/* The secret is not echoed: it may end up in a log. */
		int ret = nvmf_dhchap_key_parse(arg, k, &why);
		gw_secret_scrub_arg((char *)arg, opt == 'S' ? "-S/--dhchap-secret"
							    : "-C/--dhchap-ctrl-secret");
		if (ret < 0) {
			fprintf(stderr, "nvmf-gateway: --%s: invalid secret: %s\n",
				opt == 'S' ? "dhchap-secret" : "dhchap-ctrl-secret", why);
			return -1;
		}
		return 1;
	}
	case SESSION_OPT_SECRET_FILE:
	case SESSION_OPT_CTRL_SECRET_FILE:
		return session_secret_file(s, opt == SESSION_OPT_SECRET_FILE, arg);
	case SESSION_OPT_TLS:
		s->opts.path.tls = true;
		return 1;
	case SESSION_OPT_TLS_KEY_FILE:
		return session_tls_key_file(s, arg);
	case SESSION_OPT_TLS_KDF:
		if (!strcmp(arg, "compat")) {
			s->opts.path.tls_kdf = NVMF_TLS_KDF_COMPAT;
		} else if (!strcmp(arg, "rfc8446")) {
			s->opts.path.tls_kdf = NVMF_TLS_KDF_RFC8446;
		} else {
			fprintf(stderr, "nvmf-gateway: --tls-kdf '%s': compat or rfc8446\n", arg);
			return -1;
		}
		return 1;
	case 1001:
		s->state_dir = arg;
		return 1;
	case 'T':
	case SESSION_OPT_TOS:
		if (parse_uint(arg, 255, &v) < 0) {
			fprintf(stderr, "nvmf-gateway: --tos '%s': expected 0 to 255\n", arg);
			return -1;
		}
		s->opts.path.tos = (int)v;
		return 1;
	case 'w':
	case SESSION_OPT_HOST_TRADDR:
		if (!*arg || strlen(arg) >= sizeof(s->opts.path.host_traddr)) {
			fprintf(stderr, "nvmf-gateway: --host-traddr '%s': a numeric address\n", arg);
			return -1;
		}
		snprintf(s->opts.path.host_traddr, sizeof(s->opts.path.host_traddr), "%s", arg);
		return 1;
	case 'f':
	case SESSION_OPT_HOST_IFACE:
		/* Checked now: a typo would otherwise only show as a failed
		 * connect, retried until ctrl-loss-tmo by nbd and mount. */
		if (strlen(arg) >= IF_NAMESIZE || !if_nametoindex(arg)) {
			fprintf(stderr, "nvmf-gateway: --host-iface '%s': no such network interface\n",
				arg);
			return -1;
		}
		snprintf(s->opts.path.host_iface, sizeof(s->opts.path.host_iface), "%s", arg);
		return 1;
	case 1004:
		if (gw_parse_size(arg, &sz) < 0 || sz < 512 || sz > (64u << 20)) {
			fprintf(stderr, "nvmf-gateway: --max-xfer '%s': 512 to 64M\n", arg);
			return -1;
		}
		s->opts.max_xfer = (uint32_t)sz;
		return 1;
	}
	if (opt == 'l' || opt == 1005) {
		/* -1 = never / off, as nvme-cli takes it */
		char *end;
		long l = strtol(arg, &end, 10);
		if (*arg == 0 || *end || l < -1 || l > 86400 * 365) {
			fprintf(stderr, "nvmf-gateway: --%s '%s': seconds, or -1\n",
				opt == 'l' ? "ctrl-loss-tmo" : "fast-io-fail-tmo", arg);
			return -1;
		}
		*(opt == 'l' ? &s->ctrl_loss_tmo_s : &s->fast_io_fail_tmo_s) = (int)l;
		return 1;
	}
	struct {
		int opt;
		const char *name;
		unsigned long min, max;
	} nums[] = {
		/* At least 1 s, as the configuration file has it: 0 made a
		 * refused path reconnect in a busy loop. */
		{ 'c', "reconnect-delay", 1, 3600 },
		{ 'i', "nr-io-queues", 1, 128 }, { 'Q', "queue-size", 2, 4096 },
		{ 'k', "keep-alive-tmo", 0, 3600 }, { 1000, "nsid", 1, 0xfffffffe },
		{ 1002, "connect-timeout", 100, 600000 }, { 1003, "io-timeout", 100, 3600000 },
		{ SESSION_OPT_POLL_US, "poll-us", 0, REACTOR_MAX_POLL_US },
	};
	for (unsigned i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (nums[i].opt != opt)
			continue;
		if (parse_uint(arg, nums[i].max, &v) < 0 || v < nums[i].min) {
			fprintf(stderr, "nvmf-gateway: --%s '%s': expected %lu to %lu\n", nums[i].name,
				arg, nums[i].min, nums[i].max);
			return -1;
		}
		switch (opt) {
		case 'i': s->opts.nr_io_queues = (unsigned)v; break;
		case 'Q': s->opts.queue_size = (unsigned)v; break;
		case 'k': s->opts.kato_ms = (unsigned)v * 1000; break;
		case 'c': s->reconnect_delay_s = (int)v; break;
		case 1000: s->nsid = (uint32_t)v; break;
		case 1002: s->opts.path.connect_timeout_ms = (unsigned)v; break;
		case 1003: s->opts.io_timeout_ms = (unsigned)v; break;
		/* Before session_run makes the reactors. */
		case SESSION_OPT_POLL_US: reactor_set_poll_us((unsigned)v); break;
		}
		return 1;
	}
	return 0;
}

int session_parse_mem(struct session *s, const char *arg)
{
	char buf[64], *colon;
	uint64_t size, bs = 512;

	snprintf(buf, sizeof(buf), "%s", arg);
	colon = strchr(buf, ':');
	if (colon)
		*colon++ = 0;
	if (gw_parse_size(buf, &size) < 0 || (colon && gw_parse_size(colon, &bs) < 0) ||
	    bs < 512 || bs > 65536 || (bs & (bs - 1)) || !size || size % bs) {
		fprintf(stderr, "nvmf-gateway: --mem '%s': SIZE[:BLOCK], SIZE a multiple of "
				"BLOCK (a power of two, 512 to 64k)\n", arg);
		return -1;
	}
	s->mem_size = size;
	s->mem_block = (uint32_t)bs;
	return 0;
}

static void shutdown_done(struct nvmf_ctrl *c, int err)
{
	struct session *s = container_of(c, struct session, ctrl);
	(void)err;
	reactor_stop(&s->r);
}

static void mp_shutdown_done(struct mp_target *t, int err, void *arg)
{
	struct session *s = arg;
	(void)t;
	(void)err;
	reactor_stop(&s->r);
}

void session_finish(struct session *s, int rc)
{
	if (s->stopping)
		return;
	s->stopping = true;
	s->rc = rc;
	if (s->mem_size)
		reactor_stop(&s->r);
	else if (s->mp)
		mp_target_shutdown(s->mp, mp_shutdown_done, s);
	else
		nvmf_ctrl_shutdown(&s->ctrl, shutdown_done);
}

static void ready(struct nvmf_ctrl *c, int err)
{
	struct session *s = container_of(c, struct session, ctrl);

	if (err) {
		s->rc = 1;
		s->stopping = true;
		reactor_stop(&s->r);
		return;
	}
	s->job(s);
}

static void mp_ready(struct mp_target *t, int err, void *arg)
{
	struct session *s = arg;

	if (err) {
		/* Every path failed its first attempt (logged): no export. */
		session_finish(s, 1);
		return;
	}
	if (vol_mp_create(s->opts.subnqn, t, s->nsid, s->read_only, &s->vol) < 0) {
		session_finish(s, 1);
		return;
	}
	s->job(s);
}

static bool session_live(struct session *s)
{
	if (s->mem_size)
		return true;
	return s->mp ? s->vol != NULL : s->ctrl.state == NVMF_CTRL_LIVE;
}

static void sig_arm(struct session *s);

static void sig_done(struct reactor_op *op, int res, uint32_t flags)
{
	struct session *s = container_of(op, struct session, sig_op);
	(void)flags;
	if (res <= 0)
		return;
	log_notice("signal received: stopping");
	if (s->on_signal && session_live(s) && !s->stopping)
		s->on_signal(s);
	else
		session_finish(s, 130);
	sig_arm(s);
}

static void sig_arm(struct session *s)
{
	reactor_read(&s->r, &s->sig_op, s->sfd, s->siginfo, sizeof(struct signalfd_siginfo));
}

static void signals_open(struct session *s)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	s->sfd = signalfd(-1, &set, SFD_CLOEXEC);
	s->sig_op.fn = sig_done;
	if (s->sfd >= 0)
		sig_arm(s);
}

static void signals_close(struct session *s)
{
	if (s->sfd >= 0) {
		reactor_cancel(&s->r, &s->sig_op);
		reactor_submit(&s->r);
		close(s->sfd);
		s->sfd = -1;
	}
}

static int session_run_mem(struct session *s, session_job_fn job)
{
	uint32_t caps = VOL_CAP_FLUSH | VOL_CAP_FUA | VOL_CAP_TRIM | VOL_CAP_WRITE_ZEROES |
			VOL_CAP_FAST_ZERO | (s->read_only ? VOL_CAP_READ_ONLY : 0);

	if (reactor_init(&s->r, 0, 256) < 0)
		return 1;
	if (vol_mem_create("mem", s->mem_size, s->mem_block, caps, 1, &s->vol) < 0) {
		fprintf(stderr, "nvmf-gateway: cannot allocate a %llu-byte RAM volume\n",
			(unsigned long long)s->mem_size);
		reactor_fini(&s->r);
		return 1;
	}
	signals_open(s);
	s->job = job;
	job(s);
	reactor_run(&s->r);
	signals_close(s);
	vol_destroy(s->vol);
	s->vol = NULL;
	reactor_fini(&s->r);
	return s->rc;
}

static void extras_join(struct session_extras *x);

int session_run(struct session *s, session_job_fn job)
{
	int ret;

	/* An option beats the environment, which is emptied either way. */
	if (session_secret_env(&s->opts.dhchap_key, GW_SECRET_ENV) < 0 ||
	    session_secret_env(&s->opts.dhchap_ctrl_key, GW_SECRET_CTRL_ENV) < 0)
		return 1;
	if (s->mem_size)
		return session_run_mem(s, job);
	if (!s->opts.path.traddr[0]) {
		fprintf(stderr, "nvmf-gateway: -a/--traddr is required\n");
		return 1;
	}
	if (!s->opts.subnqn[0]) {
		fprintf(stderr, "nvmf-gateway: -n/--nqn is required\n");
		return 1;
	}
	if (s->opts.path.tls != (s->opts.path.tls_key.hash != 0)) {
		fprintf(stderr, "nvmf-gateway: %s\n",
			s->opts.path.tls ? "--tls needs --tls-key-file"
					 : "--tls-key-file needs --tls");
		return 1;
	}
	if (s->opts.path.tls && s->opts.path.trtype != NVMF_TR_TCP) {
		fprintf(stderr, "nvmf-gateway: --tls is for the tcp transport\n");
		return 1;
	}
	if (s->opts.dhchap_ctrl_key.len && !s->opts.dhchap_key.len) {
		fprintf(stderr, "nvmf-gateway: -C/--dhchap-ctrl-secret needs -S/--dhchap-secret\n");
		return 1;
	}
	if (nvmf_host_identity(s->hostnqn, s->hostid, s->state_dir, s->opts.hostnqn,
			       s->opts.hostid) < 0)
		return 1;
	if (reactor_init(&s->r, 0, 256) < 0)
		return 1;
	signals_open(s);
	s->job = job;
	if (s->want_volume) {
		struct mp_target_opts o = { .ctrl = s->opts, .nr_paths = 1 };
		struct reactor *rp[1 + SESSION_MAX_EXTRA];
		unsigned nr = 1;

		rp[0] = &s->r;
		for (unsigned i = 0; i < s->nr_extra && nr < 1 + SESSION_MAX_EXTRA; i++)
			rp[nr++] = s->extra[i];
		o.paths[0] = s->opts.path;
		o.reconnect_delay_ms = (unsigned)s->reconnect_delay_s * 1000;
		o.ctrl_loss_tmo_s = s->ctrl_loss_tmo_s;
		o.fast_io_fail_tmo_s = s->fast_io_fail_tmo_s;
		o.max_retries = 5;
		o.policy = MP_FAILOVER;
		ret = mp_target_create(&o, rp, nr, &s->mp);
		if (ret == 0)
			mp_target_connect(s->mp, mp_ready, s);
	} else {
		ret = 0;
		if (s->nr_extra) {
			/* Kept by the controller, reconnects included. */
			s->io_reactors = calloc(s->opts.nr_io_queues, sizeof(*s->io_reactors));
			if (!s->io_reactors)
				ret = -ENOMEM;
			for (unsigned i = 0; s->io_reactors && i < s->opts.nr_io_queues; i++) {
				unsigned k = i % (1 + s->nr_extra);
				s->io_reactors[i] = k ? s->extra[k - 1] : &s->r;
			}
		}
		if (ret == 0)
			ret = nvmf_ctrl_connect(&s->ctrl, &s->opts, &s->r, s->io_reactors, ready);
	}
	if (ret < 0) {
		s->rc = 1;
	} else {
		reactor_run(&s->r);
	}
	if (s->extras)
		extras_join(s->extras);
	vol_destroy(s->vol);
	s->vol = NULL;
	if (s->mp)
		mp_target_free(s->mp);
	else
		nvmf_ctrl_free(&s->ctrl);
	free(s->io_reactors);
	s->io_reactors = NULL;
	signals_close(s);
	reactor_fini(&s->r);
	return s->rc;
}

static void extra_stop(struct reactor_msg *m)
{
	reactor_stop(container_of(m, struct session_stop_msg, m)->r);
}

static void extras_join(struct session_extras *x)
{
	if (x->joined)
		return;
	x->joined = true;
	for (unsigned i = 0; i < x->nr_started; i++) {
		/* Each reactor stops itself, on its own thread. */
		x->stop[i].r = &x->r[i];
		x->stop[i].m.fn = extra_stop;
		reactor_send_msg(&x->r[i], &x->stop[i].m);
	}
	for (unsigned i = 0; i < x->nr_started; i++)
		reactor_join(&x->r[i]);
}

int session_extras_start(struct session *s, struct session_extras *x, unsigned n,
			 const char *who)
{
	x->nr_started = 0;
	x->joined = false;
	if (n > SESSION_MAX_EXTRA)
		n = SESSION_MAX_EXTRA;
	for (unsigned i = 0; i < n; i++) {
		struct reactor *r = &x->r[i];
		int ret = reactor_init(r, i + 1, 256);
		if (ret == 0 && (ret = reactor_start_thread(r)) < 0)
			reactor_fini(r);
		if (ret < 0) {
			fprintf(stderr, "nvmf-gateway %s: cannot start reactor %u: %s\n", who, i + 1,
				strerror(-ret));
			session_extras_free(x);
			return ret;
		}
		x->ptr[i] = r;
		x->nr_started = i + 1;
	}
	s->extra = x->ptr;
	s->nr_extra = x->nr_started;
	s->extras = x;
	return 0;
}

void session_extras_free(struct session_extras *x)
{
	extras_join(x);
	for (unsigned i = 0; i < x->nr_started; i++)
		reactor_fini(&x->r[i]);
	x->nr_started = 0;
}
