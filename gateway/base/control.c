#include "gateway/base/control.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/base/listen.h"
#include "gateway/base/log.h"

#define MAX_CONNS 16
/* How long a stop waits for replies being sent (or still to come) before
 * it cuts their connections: a client that does not read cannot hold the
 * gateway's exit. */
#define STOP_GRACE_NS (5 * NSEC_PER_SEC)
/* A request is logged with up to this many bytes of its "cmd". */
#define LOG_CMD_MAX 128

struct control_call {
	struct control_conn *c;
	bool outstanding;
	/* Calls that get this call's reply too (control_call_join). */
	struct control_call *joined;
};

struct control_conn {
	struct list_node link;
	struct control_srv *s;
	int fd;
	unsigned id;
	struct reactor_op op;
	bool busy; /* recv or send in the ring */
	bool eof; /* closing: nothing more is read or answered */
	bool peer_done; /* the peer shut its side: answer what came, then close */
	struct control_call call;
	/* CONTROL_CLIENT_DEADLINE_NS for a request to come in full, or for a
	 * reply to be taken; never armed while a call is outstanding. */
	struct reactor_timer deadline;
	bool timed_out;
	struct control_lines in;
	char *out;
	size_t out_len, out_off;
};

struct control_srv {
	struct reactor *r;
	int lfd;
	char *path;
	control_handle_fn *fn;
	void *arg;
	struct reactor_op accept_op;
	bool accepting;
	struct gw_access access;
	struct log_rl refuse_rl; /* the refusals' lines: a peer can cause them at will */
	struct list_node conns;
	unsigned nr_conns, next_id;
	uint64_t deadline_ns; /* CONTROL_CLIENT_DEADLINE_NS */
	uint64_t grace_ns;    /* STOP_GRACE_NS */
	bool stopping, finishing;
	struct reactor_timer stop_timer;
	void (*done)(void *);
	void *done_arg;
	struct reactor_msg done_msg;
};

static void arm_accept(struct control_srv *s);
static void stop_grace_over(struct reactor_timer *t);
static void conn_next(struct control_conn *c);
static void sent(struct reactor_op *op, int res, uint32_t flags);

static void srv_finish(struct reactor_msg *m)
{
	struct control_srv *s = container_of(m, struct control_srv, done_msg);
	void (*done)(void *) = s->done;
	void *arg = s->done_arg;

	log_notice("control %s: stopped", s->path);
	free(s->path);
	free(s);
	if (done)
		done(arg);
}

static void srv_maybe_done(struct control_srv *s)
{
	if (!s->stopping || s->finishing || s->accepting || s->nr_conns)
		return;
	s->finishing = true;
	reactor_timer_cancel(&s->stop_timer);
	if (s->lfd >= 0) {
		close(s->lfd);
		unlink(s->path);
	}
	s->lfd = -1;
	s->done_msg.fn = srv_finish;
	reactor_defer(s->r, &s->done_msg);
}

/* Only when nothing refers to it: no op in the ring, no call unanswered. */
static void conn_maybe_free(struct control_conn *c)
{
	struct control_srv *s = c->s;

	if (c->busy || c->call.outstanding)
		return;
	log_debug("control: client %u: closed", c->id);
	reactor_timer_cancel(&c->deadline);
	close(c->fd);
	list_del(&c->link);
	s->nr_conns--;
	free(c->in.buf);
	free(c->out);
	free(c);
	srv_maybe_done(s);
}

static void deadline_over(struct reactor_timer *t)
{
	struct control_conn *c = container_of(t, struct control_conn, deadline);
	bool sending = c->op.fn == sent;

	/* Armed only with the connection's recv or send in the ring. */
	if (!c->busy || c->eof)
		return;
	log_warn("control: client %u: %s in %llu s; closing it", c->id,
		 sending ? "the reply was not taken" : "no complete request",
		 (unsigned long long)(c->s->deadline_ns / NSEC_PER_SEC));
	c->timed_out = true;
	c->eof = true;
	shutdown(c->fd, SHUT_RDWR); /* its completion frees it */
}

static void sent(struct reactor_op *op, int res, uint32_t flags)
{
	struct control_conn *c = container_of(op, struct control_conn, op);
	(void)flags;

	c->busy = false;
	if (res <= 0) {
		if (res < 0 && !c->s->stopping && !c->timed_out)
			log_info("control: client %u: send: %s", c->id, strerror(-res));
		c->eof = true;
		conn_maybe_free(c);
		return;
	}
	c->out_off += (size_t)res;
	if (c->out_off < c->out_len) {
		reactor_send(c->s->r, &c->op, c->fd, c->out + c->out_off,
			     c->out_len - c->out_off, MSG_NOSIGNAL);
		c->busy = true;
		return;
	}
	reactor_timer_cancel(&c->deadline);
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_off = 0;
	if (c->s->stopping)
		c->eof = true;
	conn_next(c);
}

/* Queues text (one line, newline included) and sends it. */
static void conn_send(struct control_conn *c, char *text, size_t len)
{
	c->out = text;
	c->out_len = len;
	c->out_off = 0;
	c->op.fn = sent;
	reactor_send(c->s->r, &c->op, c->fd, c->out, c->out_len, MSG_NOSIGNAL);
	c->busy = true;
	/* The whole reply, however many sends it takes. */
	reactor_timer_arm(c->s->r, &c->deadline, c->s->deadline_ns);
}

int control_call_join(struct control_call *lead, struct control_call *call)
{
	/* At the end of the list (control_reply answers the joined ones
	 * first, then the lead). */
	struct control_call **p = &lead->joined;
	unsigned n = 0;

	while (*p) {
		p = &(*p)->joined;
		n++;
	}
	/* A joined call's connection is not read until it is answered, so a
	 * client that gave up still holds its place: without a bound, piled
	 * up calls would take every connection (MAX_CONNS) and shut out
	 * status and export-remove. */
	if (n >= CONTROL_MAX_JOINED)
		return -EBUSY;
	*p = call;
	call->joined = NULL;
	return 0;
}

/* Sends text (one line) to call's client, or drops it if that client is
 * gone; text is taken. */
static void reply_text(struct control_call *call, char *text)
{
	struct control_conn *c = call->c;

	call->outstanding = false;
	if (!text || c->eof) {
		free(text);
		c->eof = true;
		conn_maybe_free(c);
		return;
	}
	conn_send(c, text, strlen(text));
}

void control_reply(struct control_call *call, struct json_buf *j)
{
	struct control_conn *c = call->c;
	char *text;
	size_t len;

	if (!call->outstanding) {
		log_err("control: client %u: a second reply to one request (dropped)", c->id);
		json_buf_free(j);
		return;
	}
	call->outstanding = false;
	if (!json_buf_ok(j)) {
		log_err("control: client %u: the reply could not be built (%s)", c->id,
			j->nomem ? "out of memory" : "malformed");
		json_buf_free(j);
		text = strdup("{\"error\":\"the reply could not be built\"}\n");
	} else {
		text = j->p;
		len = j->len;
		json_buf_init(j);
		char *t = realloc(text, len + 2);
		if (t) {
			t[len] = '\n';
			t[len + 1] = 0;
		} else {
			free(text);
		}
		text = t;
	}
	/* The joined calls first: reply_text may free call's connection. */
	for (struct control_call *o = call->joined, *next; o; o = next) {
		next = o->joined;
		o->joined = NULL;
		reply_text(o, text ? strdup(text) : NULL);
	}
	call->joined = NULL;
	reply_text(call, text);
}

static void reply_verror(struct control_call *call, const char *fmt, va_list ap)
{
	char msg[1024];
	struct json_buf j;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	json_buf_init(&j);
	json_obj_begin(&j);
	json_kv_str(&j, "error", msg);
	json_obj_end(&j);
	control_reply(call, &j);
}

void control_reply_error(struct control_call *call, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	reply_verror(call, fmt, ap);
	va_end(ap);
}

void control_reply_ok(struct control_call *call)
{
	struct json_buf j;

	json_buf_init(&j);
	json_obj_begin(&j);
	json_kv_bool(&j, "ok", true);
	json_obj_end(&j);
	control_reply(call, &j);
}

static void refuse(struct control_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void refuse(struct control_conn *c, const char *fmt, ...)
{
	va_list ap;

	c->call.outstanding = true;
	va_start(ap, fmt);
	reply_verror(&c->call, fmt, ap);
	va_end(ap);
}

int control_parse_request(const char *line, size_t len, struct json_val **req, char *err,
			  size_t errlen)
{
	const char *nul = memchr(line, 0, len);
	const char *cmd;
	char why[128];
	int rc;

	*req = NULL;
	if (len && line[len - 1] == '\r')
		len--;
	/* Checked here and not left to the JSON parser, so the reply says
	 * what is wrong with the line rather than with its JSON. */
	if (nul) {
		snprintf(err, errlen, "a request line holds a NUL byte (offset %zu)",
			 (size_t)(nul - line));
		return -EINVAL;
	}
	rc = json_parse(line, len, req, why, sizeof(why));
	if (rc < 0) {
		snprintf(err, errlen, "bad JSON: %s", rc == -ENOMEM ? "out of memory" : why);
		*req = NULL;
		return rc;
	}
	if ((*req)->type != JSON_OBJ || !(cmd = json_get_str(*req, "cmd"))) {
		json_val_free(*req);
		*req = NULL;
		snprintf(err, errlen, "a request is an object with a string \"cmd\"");
		return -EINVAL;
	}
	return 0;
}

/* One complete line, its newline removed. */
static void handle_line(struct control_conn *c, const char *line, size_t len)
{
	struct json_val *req;
	char err[256], cmd[LOG_CMD_MAX + 1];
	const char *s;

	if (control_parse_request(line, len, &req, err, sizeof(err)) < 0) {
		log_info("control: client %u: %s", c->id, err);
		return refuse(c, "%s", err);
	}
	/* The client's string: a newline in it would start a line of its
	 * own (a forged "<3>..." journal entry). */
	s = json_get_str(req, "cmd");
	log_printable(cmd, sizeof(cmd), s, strlen(s));
	log_info("control: client %u: %s", c->id, cmd);
	c->call.outstanding = true;
	c->s->fn(c->s->arg, &c->call, req);
	json_val_free(req);
}

enum control_take control_lines_take(struct control_lines *lb, char **line, size_t *len)
{
	char *nl;

	*line = NULL;
	*len = 0;
	for (;;) {
		nl = memchr(lb->buf, '\n', lb->len);
		if (!lb->skipping)
			break;
		size_t drop = nl ? (size_t)(nl - lb->buf) + 1 : lb->len;
		memmove(lb->buf, lb->buf + drop, lb->len - drop);
		lb->len -= drop;
		lb->skipping = !nl;
		if (!nl)
			return CONTROL_TAKE_MORE;
	}
	if (!nl) {
		if (lb->len < lb->cap)
			return CONTROL_TAKE_MORE;
		lb->skipping = true;
		lb->len = 0;
		return CONTROL_TAKE_TOO_LONG;
	}
	/* Copied by length, not as a string: the line may hold a NUL, and
	 * the handler may reply at once, whose completion reads buf again. */
	size_t n = (size_t)(nl - lb->buf);
	char *l = malloc(n + 1);
	if (l) {
		memcpy(l, lb->buf, n);
		l[n] = 0;
	}
	memmove(lb->buf, nl + 1, lb->len - n - 1);
	lb->len -= n + 1;
	if (!l)
		return CONTROL_TAKE_NOMEM;
	*line = l;
	*len = n;
	return CONTROL_TAKE_LINE;
}

void control_lines_eof(struct control_lines *lb)
{
	/* Nothing is kept while skipping, and a kept partial line is under
	 * cap bytes: the buffer has room for the one byte. */
	if (lb->len && !lb->skipping)
		lb->buf[lb->len++] = '\n';
}

/* Whether the line is only blanks (then it gets no reply). */
static bool blank(const char *line, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
			return false;
	return true;
}

static void received(struct reactor_op *op, int res, uint32_t flags);

/* The next thing to do once no reply is being sent: a buffered line, or
 * more bytes, or closing. */
static void conn_next(struct control_conn *c)
{
	while (!c->busy && !c->call.outstanding && !c->eof && !c->s->stopping) {
		char *line;
		size_t len;

		switch (control_lines_take(&c->in, &line, &len)) {
		case CONTROL_TAKE_MORE:
			if (c->peer_done) {
				c->eof = true;
				break;
			}
			c->op.fn = received;
			reactor_recv(c->s->r, &c->op, c->fd, c->in.buf + c->in.len,
				     c->in.cap - c->in.len, 0);
			c->busy = true;
			/* From when the request is awaited to its newline,
			 * not per recv: a byte now and then keeps no place. */
			if (!c->deadline.armed)
				reactor_timer_arm(c->s->r, &c->deadline, c->s->deadline_ns);
			return;
		case CONTROL_TAKE_TOO_LONG:
			reactor_timer_cancel(&c->deadline);
			refuse(c, "request line over %u bytes", CONTROL_LINE_MAX);
			break;
		case CONTROL_TAKE_NOMEM:
			reactor_timer_cancel(&c->deadline);
			refuse(c, "out of memory");
			break;
		case CONTROL_TAKE_LINE:
			/* A blank line is no request: it does not reset
			 * the deadline either. */
			if (!blank(line, len)) {
				reactor_timer_cancel(&c->deadline);
				handle_line(c, line, len);
			}
			free(line);
			break;
		}
	}
	if (c->eof || (c->s->stopping && !c->busy))
		conn_maybe_free(c);
}

static void received(struct reactor_op *op, int res, uint32_t flags)
{
	struct control_conn *c = container_of(op, struct control_conn, op);
	(void)flags;

	c->busy = false;
	if (res < 0) {
		if (!c->s->stopping && !c->timed_out)
			log_info("control: client %u: recv: %s", c->id, strerror(-res));
		c->eof = true;
		conn_maybe_free(c);
		return;
	}
	if (res == 0) {
		/* A last request without its newline (printf | nc -U) still
		 * counts; the buffer has room for the one byte. */
		c->peer_done = true;
		control_lines_eof(&c->in);
	}
	c->in.len += (size_t)res;
	conn_next(c);
}

static void accepted(struct reactor_op *op, int res, uint32_t flags)
{
	struct control_srv *s = container_of(op, struct control_srv, accept_op);
	struct control_conn *c;
	(void)flags;

	s->accepting = false;
	if (s->stopping) {
		if (res >= 0)
			close(res);
		srv_maybe_done(s);
		return;
	}
	if (res < 0) {
		log_warn("control %s: accept: %s", s->path, strerror(-res));
		arm_accept(s);
		return;
	}
	if (gw_access_refused(&s->access, res, "control", s->path, &s->refuse_rl)) {
		arm_accept(s);
		return;
	}
	c = s->nr_conns < MAX_CONNS ? calloc(1, sizeof(*c)) : NULL;
	if (c && !(c->in.buf = malloc(CONTROL_LINE_MAX + 1))) {
		free(c);
		c = NULL;
	}
	if (!c) {
		log_rl_msg(&s->refuse_rl, LOG_LVL_WARN,
			   "control %s: %u clients connected already; refusing one", s->path,
			   s->nr_conns);
		close(res);
		arm_accept(s);
		return;
	}
	c->s = s;
	c->fd = res;
	c->in.cap = CONTROL_LINE_MAX;
	c->id = ++s->next_id;
	c->call.c = c;
	reactor_timer_init(&c->deadline, deadline_over);
	list_add_tail(&s->conns, &c->link);
	s->nr_conns++;
	log_debug("control: client %u: connected", c->id);
	conn_next(c);
	arm_accept(s);
}

static void arm_accept(struct control_srv *s)
{
	reactor_accept(s->r, &s->accept_op, s->lfd, NULL, NULL, SOCK_CLOEXEC);
	s->accepting = true;
}

int control_start(struct reactor *r, const char *path, control_handle_fn *fn, void *arg,
		  struct control_srv **out)
{
	return control_start_access(r, path, NULL, fn, arg, out);
}

int control_start_access(struct reactor *r, const char *path, const struct gw_access *acc,
			 control_handle_fn *fn, void *arg, struct control_srv **out)
{
	struct control_srv *s;
	int fd;

	if (!r || !path || !fn || !out)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s || !(s->path = strdup(path))) {
		free(s);
		return -ENOMEM;
	}
	reactor_timer_init(&s->stop_timer, stop_grace_over);
	/* Commands stop exports and reset controllers: the owner (root, or the
	 * user running an unprivileged gateway) only. */
	fd = gw_listen_unix(path, 16, acc, 0600);
	if (fd < 0) {
		log_err("control %s: cannot listen: %s", path,
			fd == -EADDRINUSE ? "another gateway is serving there" : strerror(-fd));
		free(s->path);
		free(s);
		return fd;
	}
	s->r = r;
	s->deadline_ns = CONTROL_CLIENT_DEADLINE_NS;
	s->grace_ns = STOP_GRACE_NS;
	s->lfd = fd;
	if (acc)
		s->access = *acc;
	s->fn = fn;
	s->arg = arg;
	s->accept_op.fn = accepted;
	list_init(&s->conns);
	arm_accept(s);
	log_notice("control: listening on %s", path);
	*out = s;
	return 0;
}

static void stop_grace_over(struct reactor_timer *t)
{
	struct control_srv *s = container_of(t, struct control_srv, stop_timer);
	struct list_node *pos, *tmp;

	/* Only replies the client does not take are cut.  A call still owed
	 * keeps its connection (and the server): the call lives in it, and
	 * its owner answers every call before it stops (gw_stop waits for
	 * the change that holds it). */
	list_for_each_safe(pos, tmp, &s->conns) {
		struct control_conn *c = container_of(pos, struct control_conn, link);
		if (c->call.outstanding || !c->busy)
			continue;
		log_warn("control: client %u: the reply is not taken after %llu s of stopping; "
			 "closing it", c->id, (unsigned long long)(s->grace_ns / NSEC_PER_SEC));
		c->eof = true;
		shutdown(c->fd, SHUT_RDWR); /* its completion frees it */
	}
}

void control_stop(struct control_srv *s, void (*done)(void *), void *arg)
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
	/* A request being answered (a reload that finished as the stop came,
	 * or one refused because of it) gets its reply: the reply is sent,
	 * then the connection closes.  Idle and reading connections close
	 * now. */
	list_for_each_safe(pos, tmp, &s->conns) {
		struct control_conn *c = container_of(pos, struct control_conn, link);
		bool replying = c->call.outstanding || (c->busy && c->op.fn == sent);
		if (replying)
			continue;
		c->eof = true;
		if (c->busy)
			shutdown(c->fd, SHUT_RDWR); /* its completion frees it */
		else
			conn_maybe_free(c);
	}
	if (s->nr_conns)
		reactor_timer_arm(s->r, &s->stop_timer, s->grace_ns);
	srv_maybe_done(s);
}

void control_set_client_deadline(struct control_srv *s, uint64_t ns)
{
	s->deadline_ns = ns;
}

void control_set_stop_grace(struct control_srv *s, uint64_t ns)
{
	s->grace_ns = ns;
}
