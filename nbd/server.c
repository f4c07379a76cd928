/* The NBD server: a listening socket on reactors[0], accepts through its
 * ring, and each connection handed to one reactor round-robin, where it
 * lives and dies.  The server's own counters live on reactors[0]; the
 * other reactors reach it by message. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "gateway/base/listen.h"
#include "nbd/internal.h"

struct srv_reactor {
	struct nbd_server *s;
	struct reactor *r;
	struct list_node conns; /* touched only on r */
	struct reactor_msg stop_msg, stop_ack;
};

struct nbd_server {
	struct nbd_server_opts opts;
	struct srv_reactor *per;
	struct reactor **reactors;
	struct nbd_export **exports;
	int lfd;
	char spec[128];
	char *unix_path;
	struct reactor_op accept_op;
	struct gw_access access; /* the listener's, kept past start */
	struct log_rl refuse_rl; /* the refusals' lines: a peer can cause them at will */
	struct sockaddr_storage peer_addr;
	socklen_t peer_len;
	bool accepting;
	struct reactor_timer retry;
	unsigned next; /* round-robin */
	unsigned long nconn; /* accepted so far, for names */
	unsigned conns; /* connections not yet gone (reactors[0] only) */
	unsigned live; /* connections not yet gone, stop acks not yet back
			* (reactors[0] only) */
	bool stopping;
	void (*done)(void *);
	void *done_arg;
};

/* A connection's last word to reactors[0]. */
struct gone_msg {
	struct reactor_msg m;
	struct nbd_server *s;
};

static void accept_arm(struct nbd_server *s);

static void maybe_done(struct nbd_server *s)
{
	if (!s->stopping || s->live || s->accepting)
		return;
	if (s->lfd >= 0) {
		close(s->lfd);
		s->lfd = -1;
	}
	log_info("nbd server %s: stopped", s->spec);
	void (*done)(void *) = s->done;
	void *arg = s->done_arg;
	free(s->per);
	free(s->reactors);
	free(s->exports);
	free(s->unix_path);
	free(s);
	if (done)
		done(arg);
}

static void gone_on_r0(struct reactor_msg *m)
{
	struct gone_msg *g = container_of(m, struct gone_msg, m);
	struct nbd_server *s = g->s;

	free(g);
	s->conns--;
	s->live--;
	maybe_done(s);
}

void nbd_server_conn_closed(void *arg, int err)
{
	struct nbd_conn *c = arg;
	struct nbd_server *s = c->srv;
	struct gone_msg *g = malloc(sizeof(*g));
	(void)err;

	list_del(&c->srv_link);
	if (!g) {
		/* Cannot tell reactors[0]: the server then never reports done. */
		log_err("nbd server %s: out of memory at connection close", s->spec);
		return;
	}
	g->s = s;
	g->m.fn = gone_on_r0;
	reactor_send_msg(s->opts.reactors[0], &g->m);
}

static void conn_arrive(struct reactor_msg *m)
{
	struct nbd_conn *c = container_of(m, struct nbd_conn, arrive_msg);
	struct srv_reactor *sr = &c->srv->per[c->srv_idx];

	list_add_tail(&sr->conns, &c->srv_link);
	nbd_conn_run(c);
}

static void peer_name(struct nbd_server *s, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	s->nconn++;
	if (s->peer_addr.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&s->peer_addr;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
	} else if (s->peer_addr.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&s->peer_addr;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
	} else {
		snprintf(buf, len, "%.64s#%lu", s->spec, s->nconn);
		return;
	}
	snprintf(buf, len, "%s:%u", host, port);
}

/* Over the limit: closed before a byte of handshake, with one line that
 * says who and why. */
static void refuse(struct nbd_server *s, int fd, const char *peer)
{
	char who[160];
	struct ucred cr;
	socklen_t cl = sizeof(cr);

	if (s->peer_addr.ss_family == AF_UNIX &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0)
		snprintf(who, sizeof(who), "%s (uid %u, pid %d)", peer, (unsigned)cr.uid,
			 (int)cr.pid);
	else
		snprintf(who, sizeof(who), "%s", peer);
	log_rl_msg(&s->refuse_rl, LOG_LVL_WARN,
		   "nbd server %s: refused %s: %u connections already open (max_connections %u)",
		   s->spec, who, s->conns, s->opts.max_connections);
	close(fd);
}

static void accept_retry(struct reactor_timer *t)
{
	struct nbd_server *s = container_of(t, struct nbd_server, retry);

	if (!s->stopping)
		accept_arm(s);
}

static void accept_done(struct reactor_op *op, int res, uint32_t flags)
{
	struct nbd_server *s = container_of(op, struct nbd_server, accept_op);
	char peer[96];
	(void)flags;

	s->accepting = false;
	if (s->stopping) {
		if (res >= 0)
			close(res);
		maybe_done(s);
		return;
	}
	if (res < 0) {
		if (res != -EINTR && res != -ECONNABORTED) {
			/* EMFILE and friends: wait a little rather than spin. */
			log_warn("nbd server %s: accept: %s", s->spec, strerror(-res));
			reactor_timer_arm(s->opts.reactors[0], &s->retry, 100 * NSEC_PER_MSEC);
			return;
		}
		accept_arm(s);
		return;
	}
	if (gw_access_refused(&s->access, res, "nbd server", s->spec, &s->refuse_rl)) {
		accept_arm(s);
		return;
	}
	int fd = res, one = 1, sndbuf = 4 << 20;
	/* A Unix socket's send buffer is only ever what SO_SNDBUF says:
	 * room for a few large read replies at once (capped by wmem_max),
	 * fewer waits for the client between partial sends.  TCP's grows by
	 * itself up to tcp_wmem's 4 MiB, and SO_SNDBUF would lock it: at the
	 * default wmem_max that is 416 KiB, and 1 MiB reads over 4
	 * connections ran 0.77-0.78 of nbdkit's MiB/s with it against
	 * 0.81-0.82 without, at 2.6 against 1.2 context switches per read
	 * (tests/bench/run, alternated; level where wmem_max is 4 MiB). */
	if (s->peer_addr.ss_family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	else
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	peer_name(s, peer, sizeof(peer));
	accept_arm(s);
	if (s->conns >= s->opts.max_connections) {
		refuse(s, fd, peer);
		return;
	}

	struct nbd_conn *c = nbd_conn_alloc(fd, peer);
	if (!c) {
		log_err("nbd server %s: out of memory for connection %s", s->spec, peer);
		close(fd);
		return;
	}
	unsigned idx = s->next++ % s->opts.nr_reactors;
	c->srv = s;
	c->srv_idx = idx;
	c->r = s->opts.reactors[idx];
	c->exports = s->opts.exports;
	c->nr_exports = s->opts.nr_exports;
	c->tls_cfg = s->opts.tls;
	c->closed = nbd_server_conn_closed;
	c->closed_arg = c;
	s->live++;
	s->conns++;
	log_info("nbd server %s: connection from %s (reactor %u)", s->spec, peer, c->r->id);
	c->arrive_msg.fn = conn_arrive;
	if (idx == 0)
		conn_arrive(&c->arrive_msg);
	else
		reactor_send_msg(c->r, &c->arrive_msg);
}

static void accept_arm(struct nbd_server *s)
{
	s->peer_len = sizeof(s->peer_addr);
	reactor_accept(s->opts.reactors[0], &s->accept_op, s->lfd,
		       (struct sockaddr *)&s->peer_addr, &s->peer_len, SOCK_CLOEXEC);
	s->accepting = true;
}

int nbd_server_start(const struct nbd_server_opts *opts, struct nbd_server **out)
{
	struct nbd_server *s;
	int fd;

	if (!opts->listen || !opts->nr_exports || !opts->nr_reactors)
		return -EINVAL;
	for (unsigned i = 0; i < opts->nr_exports; i++)
		if (!opts->exports[i] || !opts->exports[i]->vol)
			return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->per = calloc(opts->nr_reactors, sizeof(*s->per));
	s->reactors = calloc(opts->nr_reactors, sizeof(*s->reactors));
	s->exports = calloc(opts->nr_exports, sizeof(*s->exports));
	if (!s->per || !s->reactors || !s->exports) {
		free(s->per);
		free(s->reactors);
		free(s->exports);
		free(s);
		return -ENOMEM;
	}
	/* The caller's arrays may be on its stack: keep copies. */
	memcpy(s->reactors, opts->reactors, opts->nr_reactors * sizeof(*s->reactors));
	memcpy(s->exports, opts->exports, opts->nr_exports * sizeof(*s->exports));
	s->opts = *opts;
	s->opts.reactors = s->reactors;
	s->opts.exports = s->exports;
	s->opts.listen = NULL;
	if (!s->opts.max_connections)
		s->opts.max_connections = NBD_DEFAULT_MAX_CONNECTIONS;
	snprintf(s->spec, sizeof(s->spec), "%s",
		 opts->listen->spec ? opts->listen->spec : "?");
	for (unsigned i = 0; i < opts->nr_reactors; i++) {
		s->per[i].s = s;
		s->per[i].r = opts->reactors[i];
		list_init(&s->per[i].conns);
	}
	/* Mind opts->listen, not s->opts.listen: not kept past start. */
	fd = gw_listen_open(opts->listen, NBD_DEFAULT_PORT, 128);
	if (fd == -EADDRINUSE)
		log_err("nbd server %s: another server is listening there", opts->listen->spec);
	else if (fd < 0)
		log_err("nbd server %s: %s", opts->listen->spec, strerror(-fd));
	else if (opts->listen->kind == GW_LISTEN_UNIX)
		s->unix_path = strdup(opts->listen->path);
	if (fd < 0) {
		free(s->unix_path);
		free(s->per);
		free(s->reactors);
		free(s->exports);
		free(s);
		return fd;
	}
	s->lfd = fd;
	s->access = opts->listen->access;
	s->accept_op.fn = accept_done;
	reactor_timer_init(&s->retry, accept_retry);
	accept_arm(s);
	log_info("nbd server %s: listening (%u export%s, %u reactor%s, at most %u connections)",
		 s->spec, opts->nr_exports, opts->nr_exports == 1 ? "" : "s", opts->nr_reactors,
		 opts->nr_reactors == 1 ? "" : "s", s->opts.max_connections);
	*out = s;
	return 0;
}

static void stop_acked(struct reactor_msg *m)
{
	struct srv_reactor *sr = container_of(m, struct srv_reactor, stop_ack);
	struct nbd_server *s = sr->s;

	s->live--;
	maybe_done(s);
}

static void stop_on_reactor(struct reactor_msg *m)
{
	struct srv_reactor *sr = container_of(m, struct srv_reactor, stop_msg);
	struct list_node *pos, *tmp;

	/* Closing may finish a connection later (deferred), never inside
	 * this walk. */
	list_for_each_safe(pos, tmp, &sr->conns) {
		struct nbd_conn *c = container_of(pos, struct nbd_conn, srv_link);
		if (c->state == NBD_CONN_TRANSMISSION) {
			nbd_conn_drain(c, -ESHUTDOWN, "server stopping");
		} else {
			nbd_tls_bye_now(c);
			nbd_conn_fail(c, -ESHUTDOWN, "server stopping");
		}
	}
	if (sr != &sr->s->per[0]) {
		/* The server (and this message) may be freed only once
		 * reactors[0] has heard back. */
		sr->stop_ack.fn = stop_acked;
		reactor_send_msg(sr->s->opts.reactors[0], &sr->stop_ack);
	}
}

void nbd_server_stop(struct nbd_server *s, void (*done)(void *arg), void *arg)
{
	if (s->stopping)
		return;
	s->stopping = true;
	s->done = done;
	s->done_arg = arg;
	reactor_timer_cancel(&s->retry);
	if (s->unix_path)
		unlink(s->unix_path);
	if (s->accepting)
		reactor_cancel(s->opts.reactors[0], &s->accept_op);
	s->live += s->opts.nr_reactors - 1; /* the stop acks */
	for (unsigned i = 0; i < s->opts.nr_reactors; i++) {
		s->per[i].stop_msg.fn = stop_on_reactor;
		if (i == 0)
			stop_on_reactor(&s->per[i].stop_msg);
		else
			reactor_send_msg(s->per[i].r, &s->per[i].stop_msg);
	}
	maybe_done(s);
}
