#include "gateway/base/listen.h"
#include "gateway/base/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gateway/base/log.h"

/* ---- the text ---- */

void metrics_buf_init(struct metrics_buf *mb)
{
	memset(mb, 0, sizeof(*mb));
}

void metrics_buf_free(struct metrics_buf *mb)
{
	for (size_t i = 0; i < mb->nr_families; i++)
		free(mb->families[i]);
	free(mb->families);
	free(mb->p);
	metrics_buf_init(mb);
}

static bool reserve(struct metrics_buf *mb, size_t more)
{
	if (mb->nomem)
		return false;
	if (mb->len + more + 1 > mb->cap) {
		size_t cap = mb->cap ? mb->cap : 4096;
		char *p;

		while (cap < mb->len + more + 1)
			cap *= 2;
		p = realloc(mb->p, cap);
		if (!p) {
			mb->nomem = true;
			return false;
		}
		mb->p = p;
		mb->cap = cap;
	}
	return true;
}

static void put(struct metrics_buf *mb, const char *s, size_t n)
{
	if (!reserve(mb, n))
		return;
	memcpy(mb->p + mb->len, s, n);
	mb->len += n;
	mb->p[mb->len] = 0;
}

static void puts_(struct metrics_buf *mb, const char *s)
{
	put(mb, s, strlen(s));
}

static void __attribute__((format(printf, 2, 3))) putf(struct metrics_buf *mb, const char *fmt,
							 ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !reserve(mb, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(mb->p + mb->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	mb->len += (size_t)n;
}

/* HELP text escapes backslash and newline; label values also the quote. */
static void put_escaped(struct metrics_buf *mb, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			puts_(mb, "\\\\");
		else if (*s == '\n')
			puts_(mb, "\\n");
		else if (*s == '"' && quote)
			puts_(mb, "\\\"");
		else
			put(mb, s, 1);
	}
}

static bool valid_name(const char *s, bool colon)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || (colon && *s == ':')))
			return false;
	return true;
}

static bool valid_labels(const char *const *labels)
{
	for (; labels && *labels; labels += 2) {
		if (!valid_name(labels[0], false) || !strncmp(labels[0], "__", 2) ||
		    !strcmp(labels[0], "le") || !labels[1])
			return false;
	}
	return true;
}

static void refuse(struct metrics_buf *mb, const char *name, const char *why)
{
	mb->misuse++;
	log_err("metrics: %s: %s; not written", name ? name : "(null)", why);
}

/* HELP and TYPE before a family's first sample.  False when the family may
 * not be written here. */
static bool family(struct metrics_buf *mb, const char *name, const char *help, const char *type,
		   const char *const *labels)
{
	if (!valid_name(name, true)) {
		refuse(mb, name, "not a valid metric name");
		return false;
	}
	if (!valid_labels(labels)) {
		refuse(mb, name, "invalid label names (or a NULL value)");
		return false;
	}
	if (mb->nr_families && !strcmp(mb->families[mb->nr_families - 1], name))
		return true;
	for (size_t i = 0; i < mb->nr_families; i++)
		if (!strcmp(mb->families[i], name)) {
			refuse(mb, name, "family written again after another one");
			return false;
		}
	if (mb->nr_families == mb->cap_families) {
		size_t cap = mb->cap_families ? mb->cap_families * 2 : 32;
		char **f = realloc(mb->families, cap * sizeof(*f));
		if (!f) {
			mb->nomem = true;
			return false;
		}
		mb->families = f;
		mb->cap_families = cap;
	}
	if (!(mb->families[mb->nr_families] = strdup(name))) {
		mb->nomem = true;
		return false;
	}
	mb->nr_families++;
	putf(mb, "# HELP %s ", name);
	put_escaped(mb, help ? help : "", false);
	putf(mb, "\n# TYPE %s %s\n", name, type);
	return true;
}

/* name{labels[,le="..."]} */
static void sample_name(struct metrics_buf *mb, const char *name, const char *suffix,
			const char *const *labels, const char *le)
{
	bool any = false;

	puts_(mb, name);
	puts_(mb, suffix);
	for (; labels && *labels; labels += 2) {
		putf(mb, "%s%s=\"", any ? "," : "{", labels[0]);
		put_escaped(mb, labels[1], true);
		puts_(mb, "\"");
		any = true;
	}
	if (le)
		putf(mb, "%sle=\"%s\"", any ? "," : "{", le), any = true;
	if (any)
		puts_(mb, "}");
}

static void put_double(struct metrics_buf *mb, double v)
{
	if (v != v)
		puts_(mb, "NaN");
	else if (v > 1.7976931348623157e308)
		puts_(mb, "+Inf");
	else if (v < -1.7976931348623157e308)
		puts_(mb, "-Inf");
	else {
		/* The shortest of 15 or 17 digits that reads back the same. */
		char b[32];
		snprintf(b, sizeof(b), "%.15g", v);
		if (strtod(b, NULL) != v)
			snprintf(b, sizeof(b), "%.17g", v);
		puts_(mb, b);
	}
}

void metrics_counter(struct metrics_buf *mb, const char *name, const char *help,
		     const char *const *labels, uint64_t value)
{
	if (!family(mb, name, help, "counter", labels))
		return;
	sample_name(mb, name, "", labels, NULL);
	putf(mb, " %" PRIu64 "\n", value);
}

void metrics_gauge(struct metrics_buf *mb, const char *name, const char *help,
		   const char *const *labels, double value)
{
	if (!family(mb, name, help, "gauge", labels))
		return;
	sample_name(mb, name, "", labels, NULL);
	puts_(mb, " ");
	put_double(mb, value);
	puts_(mb, "\n");
}

static const struct {
	uint64_t ns;
	const char *le;
} le_bounds[] = {
	{ 10000, "1e-05" },	  { 25000, "2.5e-05" },	    { 50000, "5e-05" },
	{ 100000, "0.0001" },	  { 250000, "0.00025" },    { 500000, "0.0005" },
	{ 1000000, "0.001" },	  { 2500000, "0.0025" },    { 5000000, "0.005" },
	{ 10000000, "0.01" },	  { 25000000, "0.025" },    { 50000000, "0.05" },
	{ 100000000, "0.1" },	  { 250000000, "0.25" },    { 500000000, "0.5" },
	{ 1000000000, "1" },	  { 2500000000, "2.5" },    { 5000000000, "5" },
	{ 10000000000, "10" },
};

void metrics_histogram_seconds(struct metrics_buf *mb, const char *name, const char *help,
			       const char *const *labels, const struct hist *h)
{
	if (!family(mb, name, help, "histogram", labels))
		return;
	for (size_t i = 0; i < sizeof(le_bounds) / sizeof(le_bounds[0]); i++) {
		sample_name(mb, name, "_bucket", labels, le_bounds[i].le);
		putf(mb, " %" PRIu64 "\n", hist_count_le(h, le_bounds[i].ns));
	}
	sample_name(mb, name, "_bucket", labels, "+Inf");
	putf(mb, " %" PRIu64 "\n", hist_count(h));
	sample_name(mb, name, "_sum", labels, NULL);
	puts_(mb, " ");
	put_double(mb, hist_sum(h) / 1e9);
	puts_(mb, "\n");
	sample_name(mb, name, "_count", labels, NULL);
	putf(mb, " %" PRIu64 "\n", hist_count(h));
}

/* ---- the server ---- */

#define REQ_MAX METRICS_REQ_MAX
#define REQ_TIMEOUT_NS (10 * NSEC_PER_SEC)
#define MAX_CONNS 16

struct metrics_conn {
	struct list_node link;
	struct metrics_srv *s;
	int fd;
	struct reactor_op op;
	bool busy; /* op in the ring */
	struct reactor_timer timer;
	bool timed_out;
	char req[REQ_MAX];
	size_t req_len;
	char *out;
	size_t out_len, out_off;
	char peer[80];
};

struct metrics_srv {
	struct reactor *r;
	int lfd;
	char *unix_path;
	char *spec;
	metrics_fill_fn *fill;
	void *arg;
	struct reactor_op accept_op;
	bool accepting;
	struct gw_access access;
	struct log_rl refuse_rl; /* the refusals' lines: a peer can cause them at will */
	struct sockaddr_storage peer;
	socklen_t peer_len;
	struct list_node conns;
	unsigned nr_conns;
	bool stopping, finishing;
	void (*done)(void *);
	void *done_arg;
	struct reactor_msg done_msg;
};

static void arm_accept(struct metrics_srv *s);
static void conn_recv(struct metrics_conn *c);

static void srv_finish(struct reactor_msg *m)
{
	struct metrics_srv *s = container_of(m, struct metrics_srv, done_msg);
	void (*done)(void *) = s->done;
	void *arg = s->done_arg;

	log_notice("metrics %s: stopped", s->spec);
	free(s->spec);
	free(s);
	if (done)
		done(arg);
}

static void srv_maybe_done(struct metrics_srv *s)
{
	if (!s->stopping || s->finishing || s->accepting || s->nr_conns)
		return;
	s->finishing = true;
	if (s->lfd >= 0)
		close(s->lfd);
	s->lfd = -1;
	if (s->unix_path)
		unlink(s->unix_path);
	free(s->unix_path);
	s->unix_path = NULL;
	s->done_msg.fn = srv_finish;
	reactor_defer(s->r, &s->done_msg);
}

static void conn_close(struct metrics_conn *c)
{
	struct metrics_srv *s = c->s;

	reactor_timer_cancel(&c->timer);
	close(c->fd);
	list_del(&c->link);
	s->nr_conns--;
	free(c->out);
	free(c);
	srv_maybe_done(s);
}

static void conn_timeout(struct reactor_timer *t)
{
	struct metrics_conn *c = container_of(t, struct metrics_conn, timer);

	log_warn("metrics %s: %s: no complete request in %llu s; closing", c->s->spec, c->peer,
		 REQ_TIMEOUT_NS / NSEC_PER_SEC);
	c->timed_out = true;
	/* The pending recv or send completes with 0 or an error. */
	shutdown(c->fd, SHUT_RDWR);
}

static void sent(struct reactor_op *op, int res, uint32_t flags)
{
	struct metrics_conn *c = container_of(op, struct metrics_conn, op);
	(void)flags;

	c->busy = false;
	if (res <= 0 || c->s->stopping) {
		if (res < 0 && !c->s->stopping && !c->timed_out)
			log_info("metrics %s: %s: send: %s", c->s->spec, c->peer, strerror(-res));
		conn_close(c);
		return;
	}
	c->out_off += (size_t)res;
	if (c->out_off < c->out_len) {
		reactor_send(c->s->r, &c->op, c->fd, c->out + c->out_off,
			     c->out_len - c->out_off, MSG_NOSIGNAL);
		c->busy = true;
		return;
	}
	shutdown(c->fd, SHUT_WR);
	conn_close(c);
}

static void respond(struct metrics_conn *c, int code, const char *reason, const char *extra_hdr,
		    const char *ctype, const char *body, size_t body_len, bool head)
{
	char hdr[512];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.0 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
			 "Connection: close\r\n\r\n",
			 code, reason, ctype, body_len, extra_hdr ? extra_hdr : "");
	size_t total = (size_t)n + (head ? 0 : body_len);

	c->out = malloc(total ? total : 1);
	if (!c->out) {
		log_err("metrics %s: %s: out of memory for the reply", c->s->spec, c->peer);
		conn_close(c);
		return;
	}
	memcpy(c->out, hdr, (size_t)n);
	if (!head)
		memcpy(c->out + n, body, body_len);
	c->out_len = total;
	c->out_off = 0;
	c->op.fn = sent;
	reactor_send(c->s->r, &c->op, c->fd, c->out, c->out_len, MSG_NOSIGNAL);
	c->busy = true;
}

static void malformed(struct metrics_conn *c, const char *why)
{
	log_warn("metrics %s: %s: malformed request (%s); closing", c->s->spec, c->peer, why);
	conn_close(c);
}

static bool is_token(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 'A' || s[i] > 'Z')
			return false;
	return true;
}

static enum metrics_http http_malformed(struct metrics_http_req *out, const char *why)
{
	out->why = why;
	return METRICS_HTTP_MALFORMED;
}

enum metrics_http metrics_http_parse(char *buf, size_t len, struct metrics_http_req *out)
{
	char *line = buf, *end, *sp1, *sp2, *target;
	size_t mlen, tlen;

	memset(out, 0, sizeof(*out));
	if (memchr(buf, 0, len))
		return http_malformed(out, "NUL byte");
	if (!strstr(buf, "\r\n\r\n") && !strstr(buf, "\n\n"))
		return len >= METRICS_REQ_MAX - 1 ? http_malformed(out, "header block over 4 KiB") :
						    METRICS_HTTP_MORE;
	/* The request line: what comes before the first CR or LF. */
	end = strpbrk(line, "\r\n");
	*end = 0;
	sp1 = strchr(line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || strchr(sp2 + 1, ' '))
		return http_malformed(out, "not METHOD TARGET VERSION");
	mlen = (size_t)(sp1 - line);
	target = sp1 + 1;
	tlen = (size_t)(sp2 - target);
	if (!is_token(line, mlen))
		return http_malformed(out, "bad method");
	if (!tlen || target[0] != '/')
		return http_malformed(out, "bad request target");
	if (strcmp(sp2 + 1, "HTTP/1.0") && strcmp(sp2 + 1, "HTTP/1.1"))
		return http_malformed(out, "not HTTP/1.0 or HTTP/1.1");
	for (size_t i = 0; i < tlen; i++)
		if ((unsigned char)target[i] <= ' ' || (unsigned char)target[i] >= 0x7f)
			return http_malformed(out, "bad character in the target");
	out->method = line;
	out->method_len = mlen;
	out->head = mlen == 4 && !memcmp(line, "HEAD", 4);
	if (!out->head && !(mlen == 3 && !memcmp(line, "GET", 3)))
		return METRICS_HTTP_METHOD;
	*sp2 = 0;
	target[strcspn(target, "?")] = 0;
	out->target = target;
	return strcmp(target, "/metrics") ? METRICS_HTTP_NOT_FOUND : METRICS_HTTP_METRICS;
}

/* A complete header block, parsed into q. */
static void handle(struct metrics_conn *c, enum metrics_http verdict,
		   const struct metrics_http_req *q)
{
	bool head = q->head;

	if (verdict == METRICS_HTTP_METHOD) {
		static const char b[] = "only GET and HEAD\n";
		log_info("metrics %s: %s: %.*s: 405", c->s->spec, c->peer, (int)q->method_len,
			 q->method);
		return respond(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n",
			       "text/plain; charset=utf-8", b, sizeof(b) - 1, false);
	}
	if (verdict == METRICS_HTTP_NOT_FOUND) {
		static const char b[] = "not found; try /metrics\n";
		log_info("metrics %s: %s: %s: 404", c->s->spec, c->peer, q->target);
		return respond(c, 404, "Not Found", NULL, "text/plain; charset=utf-8", b,
			       sizeof(b) - 1, head);
	}
	struct metrics_buf mb;
	metrics_buf_init(&mb);
	c->s->fill(c->s->arg, &mb);
	if (mb.nomem) {
		static const char b[] = "out of memory\n";
		metrics_buf_free(&mb);
		return respond(c, 500, "Internal Server Error", NULL, "text/plain; charset=utf-8",
			       b, sizeof(b) - 1, head);
	}
	respond(c, 200, "OK", NULL, "text/plain; version=0.0.4; charset=utf-8", mb.p ? mb.p : "",
		mb.len, head);
	metrics_buf_free(&mb);
}

static void received(struct reactor_op *op, int res, uint32_t flags)
{
	struct metrics_conn *c = container_of(op, struct metrics_conn, op);
	struct metrics_http_req q;
	enum metrics_http verdict;
	(void)flags;

	c->busy = false;
	if (c->s->stopping) {
		conn_close(c);
		return;
	}
	if (res < 0) {
		log_info("metrics %s: %s: recv: %s", c->s->spec, c->peer, strerror(-res));
		conn_close(c);
		return;
	}
	if (res == 0) {
		if (c->req_len && !c->timed_out)
			log_info("metrics %s: %s: closed before the request was complete",
				 c->s->spec, c->peer);
		conn_close(c);
		return;
	}
	c->req_len += (size_t)res;
	c->req[c->req_len] = 0;
	verdict = metrics_http_parse(c->req, c->req_len, &q);
	switch (verdict) {
	case METRICS_HTTP_MORE:
		conn_recv(c);
		return;
	case METRICS_HTTP_MALFORMED:
		return malformed(c, q.why);
	case METRICS_HTTP_METHOD:
	case METRICS_HTTP_NOT_FOUND:
	case METRICS_HTTP_METRICS:
		reactor_timer_cancel(&c->timer);
		return handle(c, verdict, &q);
	}
}

static void conn_recv(struct metrics_conn *c)
{
	c->op.fn = received;
	reactor_recv(c->s->r, &c->op, c->fd, c->req + c->req_len, REQ_MAX - 1 - c->req_len, 0);
	c->busy = true;
}

static void peer_name(struct metrics_srv *s, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (s->peer.ss_family == AF_INET) {
		struct sockaddr_in *a = (void *)&s->peer;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(a->sin_port));
	} else if (s->peer.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (void *)&s->peer;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(a->sin6_port));
	} else {
		snprintf(buf, len, "unix client");
	}
}

static void accepted(struct reactor_op *op, int res, uint32_t flags)
{
	struct metrics_srv *s = container_of(op, struct metrics_srv, accept_op);
	struct metrics_conn *c;
	(void)flags;

	s->accepting = false;
	if (s->stopping) {
		if (res >= 0)
			close(res);
		srv_maybe_done(s);
		return;
	}
	if (res < 0) {
		log_warn("metrics %s: accept: %s", s->spec, strerror(-res));
		arm_accept(s);
		return;
	}
	if (gw_access_refused(&s->access, res, "metrics", s->spec, &s->refuse_rl)) {
		arm_accept(s);
		return;
	}
	if (s->nr_conns >= MAX_CONNS || !(c = calloc(1, sizeof(*c)))) {
		log_rl_msg(&s->refuse_rl, LOG_LVL_WARN, "metrics %s: %u scrapes open already; refusing one",
			   s->spec, s->nr_conns);
		close(res);
		arm_accept(s);
		return;
	}
	c->s = s;
	c->fd = res;
	peer_name(s, c->peer, sizeof(c->peer));
	list_add_tail(&s->conns, &c->link);
	s->nr_conns++;
	reactor_timer_init(&c->timer, conn_timeout);
	reactor_timer_arm(s->r, &c->timer, REQ_TIMEOUT_NS);
	conn_recv(c);
	arm_accept(s);
}

static void arm_accept(struct metrics_srv *s)
{
	s->peer_len = sizeof(s->peer);
	reactor_accept(s->r, &s->accept_op, s->lfd, (struct sockaddr *)&s->peer, &s->peer_len,
		       SOCK_CLOEXEC);
	s->accepting = true;
}

int metrics_start(struct reactor *r, const struct gw_listen *l, metrics_fill_fn *fill, void *arg,
		  struct metrics_srv **out)
{
	struct metrics_srv *s;
	int fd;

	if (!r || !l || !fill || !out || (l->kind != GW_LISTEN_UNIX && l->kind != GW_LISTEN_TCP))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s || !(s->spec = strdup(l->spec ? l->spec : "?"))) {
		free(s);
		return -ENOMEM;
	}
	fd = gw_listen_open(l, 0, 16);
	if (fd >= 0 && l->kind == GW_LISTEN_UNIX && !(s->unix_path = strdup(l->path))) {
		close(fd);
		fd = -ENOMEM;
	}
	if (fd < 0) {
		log_err("metrics %s: cannot listen: %s", s->spec, strerror(-fd));
		free(s->spec);
		free(s);
		return fd;
	}
	s->r = r;
	s->lfd = fd;
	s->access = l->access;
	s->fill = fill;
	s->arg = arg;
	s->accept_op.fn = accepted;
	list_init(&s->conns);
	arm_accept(s);
	log_notice("metrics: serving GET /metrics on %s", s->spec);
	*out = s;
	return 0;
}

void metrics_stop(struct metrics_srv *s, void (*done)(void *), void *arg)
{
	struct list_node *pos, *tmp;

	if (!s) {
		if (done)
			done(arg);
		return;
	}
	s->stopping = true;
	s->done = done;
	s->done_arg = arg;
	if (s->accepting)
		reactor_cancel(s->r, &s->accept_op);
	list_for_each_safe(pos, tmp, &s->conns) {
		struct metrics_conn *c = container_of(pos, struct metrics_conn, link);
		if (c->busy)
			shutdown(c->fd, SHUT_RDWR); /* its completion closes it */
		else
			conn_close(c);
	}
	srv_maybe_done(s);
}
