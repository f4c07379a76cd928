/* nvmf-test-target: options, the epoll loop, listeners, the control socket
 * and the --ctl client. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "tests/target/tgt.h"

struct tgt T;

enum ep_kind { EP_CONN = 0, EP_LISTEN = 1, EP_CTL_LISTEN = 2, EP_CTL = 3, EP_SIGNAL = 4 };
#define EP_REF(kind, idx) (((uint64_t)(kind) << 48) | (idx))
#define MAX_CTL 16

struct ctl_client {
	int fd;
	char buf[1024];
	size_t len;
};

static struct ctl_client ctls[MAX_CTL];
static int ctl_fd = -1;
static const char *ctl_path;
static const char *ready_file;
static char listen_addr[64] = "127.0.0.1";

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void tgt_conn_arm(struct tgt_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN | (c->want_out ? EPOLLOUT : 0),
				  .data.ptr = c };
	epoll_ctl(T.epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* ---- listeners ---- */

static int listen_one(unsigned i)
{
	struct tgt_port *p = &T.ports[i];
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST |
				  AI_NUMERICSERV | AI_PASSIVE };
	struct addrinfo *ai;
	int one = 1, fd;

	if (getaddrinfo(p->addr, p->svc, &hints, &ai)) {
		fprintf(stderr, "nvmf-test-target: '%s' port '%s': numeric address and port expected\n",
			p->addr, p->svc);
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
		fprintf(stderr, "nvmf-test-target: listen on %s:%s: %s\n", p->addr, p->svc,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	p->v6 = ai->ai_family == AF_INET6;
	freeaddrinfo(ai);
	if (!strcmp(p->svc, "0")) {
		/* An ephemeral port: keep it, so a refuse window reopens it. */
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		getsockname(fd, (struct sockaddr *)&ss, &sl);
		unsigned port = ntohs(ss.ss_family == AF_INET6 ?
					      ((struct sockaddr_in6 *)&ss)->sin6_port :
					      ((struct sockaddr_in *)&ss)->sin_port);
		snprintf(p->svc, sizeof(p->svc), "%u", port);
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = EP_REF(EP_LISTEN, i) };
	epoll_ctl(T.epfd, EPOLL_CTL_ADD, fd, &ev);
	p->fd = fd;
	return 0;
}

int tgt_listen_open(void)
{
	for (unsigned i = 0; i < T.nr_ports; i++)
		if (T.ports[i].fd < 0 && !T.ports[i].down && listen_one(i) < 0)
			return -1;
	return 0;
}

void tgt_listen_close_one(unsigned i)
{
	if (T.ports[i].fd >= 0) {
		close(T.ports[i].fd);
		T.ports[i].fd = -1;
	}
}

void tgt_listen_close(void)
{
	for (unsigned i = 0; i < T.nr_ports; i++)
		tgt_listen_close_one(i);
}

static void do_accept(unsigned port)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char host[INET6_ADDRSTRLEN] = "?", peer[80];
		int one = 1;
		int fd = accept4(T.ports[port].fd, (struct sockaddr *)&ss, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), NULL, 0, NI_NUMERICHOST);
		snprintf(peer, sizeof(peer), "%s:%u",
			 host, ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
								 ((struct sockaddr_in *)&ss)->sin_port));
		struct tgt_conn *c = conn_new(fd, port, peer);
		if (!c) {
			log_err("%s: no memory for a connection", peer);
			continue; /* conn_new closed fd */
		}
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		epoll_ctl(T.epfd, EPOLL_CTL_ADD, fd, &ev);
		list_add_tail(&T.conns, &c->link);
		T.nr_conns_total++;
		log_info("%s: connected to port %u", peer, port + 1);
	}
}

/* ---- control socket ---- */

static int ctl_open(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(ctl_path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "nvmf-test-target: --control path too long\n");
		return -1;
	}
	strcpy(sa.sun_path, ctl_path);
	unlink(ctl_path);
	ctl_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ctl_fd < 0 || bind(ctl_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(ctl_fd, 8) < 0) {
		fprintf(stderr, "nvmf-test-target: control socket %s: %s\n", ctl_path,
			strerror(errno));
		return -1;
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = EP_REF(EP_CTL_LISTEN, 0) };
	epoll_ctl(T.epfd, EPOLL_CTL_ADD, ctl_fd, &ev);
	for (unsigned i = 0; i < MAX_CTL; i++)
		ctls[i].fd = -1;
	return 0;
}

static void ctl_accept(void)
{
	int fd = accept4(ctl_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	for (unsigned i = 0; i < MAX_CTL; i++)
		if (ctls[i].fd < 0) {
			ctls[i].fd = fd;
			ctls[i].len = 0;
			struct epoll_event ev = { .events = EPOLLIN, .data.u64 = EP_REF(EP_CTL, i) };
			epoll_ctl(T.epfd, EPOLL_CTL_ADD, fd, &ev);
			return;
		}
	static const char busy[] = "err too many control connections\n";
	ssize_t r = write(fd, busy, sizeof(busy) - 1);
	(void)r;
	close(fd);
}

static void ctl_close(struct ctl_client *cc)
{
	close(cc->fd);
	cc->fd = -1;
}

static void ctl_read(struct ctl_client *cc)
{
	ssize_t r = read(cc->fd, cc->buf + cc->len, sizeof(cc->buf) - 1 - cc->len);
	char *nl;

	if (r <= 0) {
		if (r == 0 || (errno != EAGAIN && errno != EINTR))
			ctl_close(cc);
		return;
	}
	cc->len += (size_t)r;
	cc->buf[cc->len] = 0;
	while ((nl = strchr(cc->buf, '\n'))) {
		char reply[640];
		*nl = 0;
		log_info("control: %s", cc->buf);
		faults_command(cc->buf, reply, sizeof(reply) - 1);
		strcat(reply, "\n");
		ssize_t w = write(cc->fd, reply, strlen(reply));
		(void)w;
		size_t used = (size_t)(nl + 1 - cc->buf);
		memmove(cc->buf, nl + 1, cc->len - used + 1);
		cc->len -= used;
	}
	if (cc->len == sizeof(cc->buf) - 1) {
		static const char toolong[] = "err line too long\n";
		ssize_t w = write(cc->fd, toolong, sizeof(toolong) - 1);
		(void)w;
		ctl_close(cc);
	}
}

static int ctl_client(const char *path, int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char line[1024] = "", reply[1024];
	size_t len = 0;
	int fd;

	if (argc < 1) {
		fprintf(stderr, "nvmf-test-target: --ctl PATH COMMAND...\n");
		return 2;
	}
	for (int i = 0; i < argc; i++)
		snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s", i ? " " : "",
			 argv[i]);
	strcat(line, "\n");
	if (strlen(path) >= sizeof(sa.sun_path))
		return 2;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "nvmf-test-target: control socket %s: %s\n", path, strerror(errno));
		return 2;
	}
	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
		return 2;
	while (len < sizeof(reply) - 1) {
		ssize_t r = read(fd, reply + len, sizeof(reply) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
		if (memchr(reply, '\n', len))
			break;
	}
	close(fd);
	reply[len] = 0;
	fputs(reply, stdout);
	return strncmp(reply, "ok", 2) == 0 ? 0 : 1;
}

/* ---- main loop ---- */

static void write_ready_file(void)
{
	char tmp[4096];
	FILE *f;

	if (!ready_file)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", ready_file);
	f = fopen(tmp, "w");
	if (!f)
		return;
	for (unsigned i = 0; i < T.nr_ports; i++)
		fprintf(f, "%s\n", T.ports[i].svc);
	fclose(f);
	rename(tmp, ready_file);
}

static int next_timeout_ms(uint64_t now)
{
	uint64_t next = now + 1000000000ull; /* at least once a second */
	struct list_node *n;

	if (!list_empty(&T.delayed)) {
		struct tgt_cmd *cmd = container_of(T.delayed.next, struct tgt_cmd, link);
		if (cmd->due_ns < next)
			next = cmd->due_ns;
	}
	for (n = T.ctrls.next; n != &T.ctrls; n = n->next) {
		struct tgt_ctrl *ctrl = container_of(n, struct tgt_ctrl, link);
		if (ctrl->kato_deadline_ns && ctrl->kato_deadline_ns + 1000000 < next)
			next = ctrl->kato_deadline_ns + 1000000;
	}
	if (T.f.refuse_until_ns && T.f.refuse_until_ns < next)
		next = T.f.refuse_until_ns;
	return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

static int run(int sfd)
{
	struct epoll_event evs[64];

	for (;;) {
		int n = epoll_wait(T.epfd, evs, 64, next_timeout_ms(now_ns()));
		if (n < 0 && errno != EINTR) {
			perror("epoll_wait");
			return 1;
		}
		for (int i = 0; i < n; i++) {
			uint64_t ref = evs[i].data.u64;
			unsigned kind = (unsigned)(ref >> 48), idx = (unsigned)(ref & 0xffffffff);
			if (kind == EP_CONN) {
				struct tgt_conn *c = evs[i].data.ptr;
				if (!c->closing && (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
					conn_readable(c);
				if (!c->closing && (evs[i].events & EPOLLOUT))
					conn_writable(c);
			} else if (kind == EP_LISTEN) {
				if (T.ports[idx].fd >= 0)
					do_accept(idx);
			} else if (kind == EP_CTL_LISTEN) {
				ctl_accept();
			} else if (kind == EP_CTL) {
				if (ctls[idx].fd >= 0)
					ctl_read(&ctls[idx]);
			} else if (kind == EP_SIGNAL) {
				struct signalfd_siginfo si;
				if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
					log_notice("signal %u: exiting", si.ssi_signo);
					return 0;
				}
			}
		}
		uint64_t now = now_ns();
		while (!list_empty(&T.delayed)) {
			struct tgt_cmd *cmd = container_of(T.delayed.next, struct tgt_cmd, link);
			if (cmd->due_ns > now)
				break;
			list_del(&cmd->link);
			if (cmd->exec_pending)
				nvme_io_execute_delayed(cmd);
			else
				cmd_send_completion(cmd);
		}
		nvme_kato_check(now);
		if (T.f.refuse_until_ns && now >= T.f.refuse_until_ns) {
			T.f.refuse_until_ns = 0;
			if (tgt_listen_open() == 0)
				log_notice("fault: accepting connections again");
		}
		struct list_node *f;
		while ((f = list_pop(&T.flushq))) {
			struct tgt_conn *c = container_of(f, struct tgt_conn, flink);
			c->on_flushq = false;
			conn_writable(c);
		}
		while ((f = list_pop(&T.dead))) {
			struct tgt_conn *c = container_of(f, struct tgt_conn, link);
			epoll_ctl(T.epfd, EPOLL_CTL_DEL, c->fd, NULL);
			conn_free(c);
		}
	}
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: nvmf-test-target [-a ADDR] [-s PORT]... [--subsys NQN:SIZE[:BLOCK][:NSCOUNT]]...\n"
		"                        [--allow-host HOSTNQN] [--control PATH] [--ready-file PATH]\n"
		"                        [--maxh2cdata N] [--r2t-size N] [--success sqflow|always|never]\n"
		"                        [--seed N] [--dlfeat N] [-v] [faults...]\n"
		"       nvmf-test-target --ctl PATH COMMAND...\n\n"
		"A RAM-backed NVMe/TCP target for tests (not for data you want to keep).\n"
		"  -a ADDR          listen address (default 127.0.0.1; loopback and test networks only)\n"
		"  -s PORT          listen port, repeatable (port ids 1, 2, ...); 0 picks a free one\n"
		"  --subsys SPEC    a subsystem of NSCOUNT (1) namespaces of SIZE bytes, BLOCK (512)\n"
		"  --allow-host NQN only this host may connect to the last --subsys\n"
		"  --control PATH   unix socket taking one fault command per line\n"
		"  --ready-file F   written with the bound ports once listening\n"
		"  --dlfeat N       Identify Namespace DLFEAT (default 0x09; 0 as nvmet on many bdevs)\n"
		"  --persist DIR    namespaces kept in files in DIR, across restarts and kill -9\n"
		"                   (write-through, no volatile write cache, unless --vwc)\n"
		"  --vwc            with --persist: a volatile write cache; a restart keeps only\n"
		"                   what was flushed or written with FUA (both before --subsys)\n"
		"  --ana-pad N      N more (empty) ANA groups in the ANA log, ids from 1000, so\n"
		"                   that the page outgrows 4 KiB\n"
		"  --tls-key FILE   every port requires NVMe/TCP TLS 1.3 with this configured\n"
		"                   PSK (NVMeTLSkey-1:01:...:); TREQ \"required\" in the log\n"
		"  --tls-kdf K      compat (default, as nvme-cli 2.13 provisions nvmet) or rfc8446\n"
		"  --plain-port N   with --tls-key: port id N (1, 2, ...) stays plaintext\n"
		"                   (TREQ \"not specified\"), for a TLS port next to a plain one\n"
		"  --port-treq N:T  port id N lists TREQ T in the discovery log: required,\n"
		"                   not-required (with --tls-key the port then takes TLS and\n"
		"                   plaintext connections) or not-specified (only the listing\n"
		"                   changes: TLS as --tls-key and --plain-port say)\n"
		"  --tls-ku-flood S with --tls-key: after each handshake, for S seconds, reads\n"
		"                   nothing and sends key update requests (a hostile peer)\n"
		"  --uuid-only      namespaces report NGUID and EUI-64 zero and their UUID in\n"
		"                   the descriptor list only (as nvmet by default)\n"
		"  --tls-pack       with --tls-key: records of up to 16 KiB across PDU\n"
		"                   boundaries (as kernel TLS seals), not one per PDU piece\n"
		"Faults (the same words as control commands; ':' for spaces):\n"
		"  --drop-after N --refuse SECS --delay MS --status SCT:SC[:dnr][:FRACTION]\n"
		"  --corrupt hdgst|ddgst --malformed type|hlen|cid|plen\n"
		"Control commands: ping, drop, drop-after N, refuse SECS, delay MS,\n"
		"  status SCT SC [dnr] [FRACTION], status off, corrupt hdgst|ddgst [io],\n"
		"  malformed type|hlen|cid|plen, ana NQN NSID STATE [PORT] [noaen],\n"
		"  ana-group NQN NSID GRP [noaen], lose-cache, clear, stats,\n"
		"  dsm-noop on|off (Dataset Management deallocates nothing; stats counts\n"
		"  Write Zeroes with and without DEAC),\n"
		"  disc-hide|disc-show NQN (left out of / back in the discovery log, with\n"
		"  the change event), disc-referral ADDR SVC, disc-referral-clear,\n"
		"  port PORT down|up (stop listening there and drop its connections; listen again),\n"
		"  status-ns NSID (the status knob for that namespace only; 0: all),\n"
		"  status SCT SC [dnr] [crd1|crd2|crd3] [FRACTION], crdt T1 T2 T3 (Identify\n"
		"  CRDT, 100 ms units, from the next Identify), cqt MS (Identify CQT, from the\n"
		"  next Identify), late MS (every I/O command takes effect MS ms after it\n"
		"  arrived, as a controller still working on it after its host gave up),\n"
		"  ana-after-pieces NQN NSID STATE\n"
		"  [PORT] (one shot, no event: after a read on PORT of the ANA log at an offset\n"
		"  reaching its end), abort-honour on|off (an Abort of a command waiting for\n"
		"  its delayed completion completes it with Command Abort Requested),\n"
		"  rdy-stall on|off (after CC.EN the first CSTS read says not ready, later\n"
		"  ones are never answered), admin-delay MS (every answer on an admin queue,\n"
		"  its Connect's included, sent MS ms late: a slow controller's bring-up)\n");
}

int main(int argc, char **argv)
{
	enum { O_SUBSYS = 1000, O_CONTROL, O_CTL, O_READY, O_MAXH2C, O_R2T, O_SUCCESS, O_SEED,
	       O_ALLOW, O_FAULT, O_DLFEAT, O_PERSIST, O_VWC, O_ANA_PAD, O_TLS_KEY, O_TLS_KDF,
	       O_PLAIN_PORT, O_TLS_KU_FLOOD, O_PORT_TREQ, O_TLS_PACK,
	       O_UUID_ONLY };
	static const struct option longopts[] = {
		{ "traddr", required_argument, 0, 'a' },
		{ "trsvcid", required_argument, 0, 's' },
		{ "subsys", required_argument, 0, O_SUBSYS },
		{ "allow-host", required_argument, 0, O_ALLOW },
		{ "control", required_argument, 0, O_CONTROL },
		{ "ctl", required_argument, 0, O_CTL },
		{ "ready-file", required_argument, 0, O_READY },
		{ "maxh2cdata", required_argument, 0, O_MAXH2C },
		{ "r2t-size", required_argument, 0, O_R2T },
		{ "success", required_argument, 0, O_SUCCESS },
		{ "seed", required_argument, 0, O_SEED },
		{ "dlfeat", required_argument, 0, O_DLFEAT },
		{ "persist", required_argument, 0, O_PERSIST },
		{ "vwc", no_argument, 0, O_VWC },
		{ "ana-pad", required_argument, 0, O_ANA_PAD },
		{ "tls-key", required_argument, 0, O_TLS_KEY },
		{ "tls-kdf", required_argument, 0, O_TLS_KDF },
		{ "plain-port", required_argument, 0, O_PLAIN_PORT },
		{ "port-treq", required_argument, 0, O_PORT_TREQ },
		{ "tls-ku-flood", required_argument, 0, O_TLS_KU_FLOOD },
		{ "tls-pack", no_argument, 0, O_TLS_PACK },
		{ "uuid-only", no_argument, 0, O_UUID_ONLY },
		{ "drop-after", required_argument, 0, O_FAULT },
		{ "refuse", required_argument, 0, O_FAULT },
		{ "delay", required_argument, 0, O_FAULT },
		{ "admin-delay", required_argument, 0, O_FAULT },
		{ "status", required_argument, 0, O_FAULT },
		{ "corrupt", required_argument, 0, O_FAULT },
		{ "malformed", required_argument, 0, O_FAULT },
		{ "abort-honour", required_argument, 0, O_FAULT },
		{ "rdy-stall", required_argument, 0, O_FAULT },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *ports[TGT_MAX_PORTS];
	unsigned nports = 0;
	int opt, idx;
	const char *tls_key = NULL, *tls_kdf = NULL;

	log_init_as("nvmf-test-target", "NVMF_TEST_TARGET_LOG", LOG_LVL_INFO, 1);
	T.maxh2cdata = 131072;
	T.dlfeat = -1;
	T.f.drop_after = -1;
	T.f.rng = 0x2545f4914f6cdd1dull;
	list_init(&T.conns);
	list_init(&T.ctrls);
	list_init(&T.delayed);
	list_init(&T.flushq);
	list_init(&T.dead);
	/* The discovery subsystem is always there, first. */
	T.subsys = calloc(1, sizeof(*T.subsys));
	if (!T.subsys)
		return 1;
	snprintf(T.subsys[0].nqn, sizeof(T.subsys[0].nqn), "%s", NVME_DISC_SUBSYS_NQN);
	T.subsys[0].discovery = true;
	T.nr_subsys = 1;

	while ((opt = getopt_long(argc, argv, "+a:s:vh", longopts, &idx)) != -1) {
		unsigned long v;
		char *end;
		switch (opt) {
		case 'a':
			snprintf(listen_addr, sizeof(listen_addr), "%s", optarg);
			break;
		case 's':
			if (nports == TGT_MAX_PORTS) {
				fprintf(stderr, "nvmf-test-target: at most %d ports\n", TGT_MAX_PORTS);
				return 1;
			}
			ports[nports++] = optarg;
			break;
		case 'v':
			log_set_level(LOG_LVL_DEBUG);
			break;
		case O_TLS_KEY:
			tls_key = optarg;
			break;
		case O_TLS_KDF:
			tls_kdf = optarg;
			break;
		case O_UUID_ONLY:
			T.uuid_only = true;
			break;
		case O_TLS_PACK:
			T.tls_pack = true;
			break;
		case O_TLS_KU_FLOOD:
			v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > 600) {
				fprintf(stderr, "nvmf-test-target: --tls-ku-flood: 1 to 600 seconds\n");
				return 1;
			}
			T.tls_ku_flood = (unsigned)v;
			break;
		case O_PLAIN_PORT:
			v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > TGT_MAX_PORTS) {
				fprintf(stderr, "nvmf-test-target: --plain-port: a port id, 1 to %d\n",
					TGT_MAX_PORTS);
				return 1;
			}
			T.ports[v - 1].plain = true;
			break;
		case O_PORT_TREQ: {
			static const char *const names[] = { "not-specified", "required",
							      "not-required" };
			v = strtoul(optarg, &end, 10);
			int k = 0;
			while (*end == ':' && k < 3 && strcmp(end + 1, names[k]))
				k++;
			if (v < 1 || v > TGT_MAX_PORTS || *end != ':' || k == 3) {
				fprintf(stderr, "nvmf-test-target: --port-treq: N:required, "
					"N:not-required or N:not-specified (N 1 to %d)\n", TGT_MAX_PORTS);
				return 1;
			}
			T.ports[v - 1].treq = k + 1;
			break;
		}
		case O_SUBSYS:
			if (subsys_add(optarg) < 0)
				return 1;
			break;
		case O_ALLOW:
			if (T.nr_subsys < 2) {
				fprintf(stderr, "nvmf-test-target: --allow-host after a --subsys\n");
				return 1;
			}
			T.subsys[T.nr_subsys - 1].allow_host = optarg;
			break;
		case O_PERSIST:
		case O_VWC:
			if (T.nr_subsys > 1) {
				fprintf(stderr, "nvmf-test-target: --%s before any --subsys\n",
					longopts[idx].name);
				return 1;
			}
			if (opt == O_PERSIST)
				T.persist_dir = optarg;
			else
				T.vwc = true;
			break;
		case O_ANA_PAD:
			T.ana_pad = (unsigned)strtoul(optarg, NULL, 0);
			if (T.ana_pad > 60000) {
				fprintf(stderr, "nvmf-test-target: --ana-pad: at most 60000\n");
				return 2;
			}
			break;
		case O_DLFEAT:
			T.dlfeat = (int)(strtoul(optarg, NULL, 0) & 0xff);
			break;
		case O_CONTROL:
			ctl_path = optarg;
			break;
		case O_CTL:
			return ctl_client(optarg, argc - optind, argv + optind);
		case O_READY:
			ready_file = optarg;
			break;
		case O_MAXH2C:
		case O_R2T:
			v = strtoul(optarg, &end, 0);
			if (*end || (opt == O_MAXH2C && (v < 4096 || v % 4 || v > (16u << 20))) ||
			    (opt == O_R2T && v && (v < 512 || v > TGT_MAX_XFER))) {
				fprintf(stderr, "nvmf-test-target: --%s '%s' out of range\n",
					longopts[idx].name, optarg);
				return 1;
			}
			if (opt == O_MAXH2C)
				T.maxh2cdata = (uint32_t)v;
			else
				T.r2t_size = (uint32_t)v;
			break;
		case O_SUCCESS:
			if (!strcmp(optarg, "sqflow"))
				T.success_mode = 0;
			else if (!strcmp(optarg, "always"))
				T.success_mode = 1;
			else if (!strcmp(optarg, "never"))
				T.success_mode = -1;
			else {
				fprintf(stderr, "nvmf-test-target: --success sqflow|always|never\n");
				return 1;
			}
			break;
		case O_SEED:
			T.f.rng = strtoull(optarg, NULL, 0) | 1;
			break;
		case O_FAULT:
			if (faults_option(longopts[idx].name, optarg) < 0)
				return 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "nvmf-test-target: unexpected argument '%s'\n", argv[optind]);
		return 1;
	}
	if (tls_key) {
		char line[256] = "";
		FILE *f = fopen(tls_key, "re");
		if (!f || !fgets(line, sizeof(line), f)) {
			fprintf(stderr, "nvmf-test-target: --tls-key %s: %s\n", tls_key,
				f ? "empty" : strerror(errno));
			if (f)
				fclose(f);
			return 1;
		}
		fclose(f);
		line[strcspn(line, "\r\n")] = 0;
		if (tgt_tls_setup(line, tls_kdf) < 0)
			return 1;
	}
	if (!nports)
		ports[nports++] = "4420";
	for (unsigned i = 0; i < nports; i++) {
		T.ports[i].fd = -1;
		snprintf(T.ports[i].addr, sizeof(T.ports[i].addr), "%s", listen_addr);
		snprintf(T.ports[i].svc, sizeof(T.ports[i].svc), "%s", ports[i]);
	}
	T.nr_ports = nports;
	T.genctr = 1;

	signal(SIGPIPE, SIG_IGN);
	T.epfd = epoll_create1(EPOLL_CLOEXEC);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = EP_REF(EP_SIGNAL, 0) };
	epoll_ctl(T.epfd, EPOLL_CTL_ADD, sfd, &ev);
	if (ctl_path && ctl_open() < 0)
		return 1;
	/* A refuse window given on the command line starts closed. */
	if (!T.f.refuse_until_ns && tgt_listen_open() < 0)
		return 1;
	for (unsigned i = 0; i < T.nr_ports; i++)
		log_notice("listening on %s port %s (port id %u)", T.ports[i].addr, T.ports[i].svc,
			   i + 1);
	for (unsigned i = 1; i < T.nr_subsys; i++)
		log_notice("subsystem %s: %u namespace(s) of %llu blocks of %u bytes",
			   T.subsys[i].nqn, T.subsys[i].nr_ns,
			   (unsigned long long)T.subsys[i].ns[0].nblocks, T.subsys[i].ns[0].block);
	write_ready_file();
	int rc = run(sfd);
	if (ctl_path)
		unlink(ctl_path);
	return rc;
}
