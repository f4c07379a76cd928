/* The control socket: a Unix stream socket (mode 0600) served on one
 * reactor, one JSON object per line each way.  A request is an object with
 * a string "cmd"; each gets exactly one reply line, in order, which the
 * owner may give later (a reload answers once it is applied).  The server
 * knows no commands: it parses the line and hands the tree to the owner's
 * handler.  A line that is not JSON, not an object, has no "cmd" or is
 * longer than CONTROL_LINE_MAX gets {"error":"..."} on that connection
 * only (the rest of an over-long line is skipped up to its newline), and
 * the connection goes on. */
#ifndef GW_CONTROL_H
#define GW_CONTROL_H

#include "gateway/base/access.h"
#include "gateway/base/json.h"
#include "gateway/base/reactor.h"

#define CONTROL_LINE_MAX (64 * 1024)
/* A client has this long to send a whole request once one is awaited,
 * and to take a whole reply; else its connection is closed (logged), so
 * idle or non-reading clients cannot hold every place and shut out
 * status and reload.  The time the owner takes to answer is not counted. */
#define CONTROL_CLIENT_DEADLINE_NS (10 * NSEC_PER_SEC)

struct control_srv;
struct control_call;

/* req is an object with a string member "cmd"; valid during the call
 * only.  The handler answers with one of the control_reply* functions,
 * now or later, exactly once. */
typedef void control_handle_fn(void *arg, struct control_call *call, const struct json_val *req);

/* The framing of one connection's input, apart from the socket so that
 * it can be driven byte by byte (tests/fuzz/fuzz_control.c).  buf holds
 * cap + 1 bytes: at most cap bytes of a line without its newline, plus the
 * newline that end of input adds to a last unterminated line.  A line of
 * cap bytes or more is refused and skipped up to its newline. */
struct control_lines {
	char *buf;
	size_t len, cap;
	bool skipping;
};

enum control_take {
	CONTROL_TAKE_MORE, /* no complete line: read more (room: cap - len) */
	CONTROL_TAKE_LINE, /* *line (malloc'd, NUL-terminated, len bytes) */
	CONTROL_TAKE_TOO_LONG, /* the line was over cap: answer an error */
	CONTROL_TAKE_NOMEM, /* the line was dropped: answer an error */
};

/* Takes the next complete line out of the buffer (its newline dropped). */
enum control_take control_lines_take(struct control_lines *lb, char **line, size_t *len);
/* The peer closed its side: a last line without its newline still counts. */
void control_lines_eof(struct control_lines *lb);

/* One line as a request: 0 with *req (an object with a string "cmd"), or
 * -EINVAL with the reason in err (a NUL byte, not JSON, no "cmd"), or
 * -ENOMEM.  A trailing CR is ignored. */
int control_parse_request(const char *line, size_t len, struct json_val **req, char *err,
			  size_t errlen);

/* Listens on path (a stale socket file is replaced, a live server's is
 * not: -EADDRINUSE) and serves on r.  0 or -errno (logged). */
int control_start(struct reactor *r, const char *path, control_handle_fn *fn, void *arg,
		  struct control_srv **out);
/* Another client deadline than CONTROL_CLIENT_DEADLINE_NS, for tests. */
void control_set_client_deadline(struct control_srv *s, uint64_t ns);
/* Another stop grace than STOP_GRACE_NS (5 s), for tests. */
void control_set_stop_grace(struct control_srv *s, uint64_t ns);
/* As control_start, the socket guarded by acc (file owner, group, mode
 * 0600 unless named; peer uid/gid allow-list); acc may be NULL. */
int control_start_access(struct reactor *r, const char *path, const struct gw_access *acc,
			 control_handle_fn *fn, void *arg, struct control_srv **out);
/* Closes the listener and idle connections; a connection with a call
 * outstanding closes once it is answered.  done(arg) runs on the reactor
 * when nothing is left; the socket file is removed. */
void control_stop(struct control_srv *s, void (*done)(void *), void *arg);

/* call (outstanding, not answered by its own handler) gets whatever
 * lead is answered, when lead is: several requests that one piece of work
 * answers (reloads queued behind one change). */
#define CONTROL_MAX_JOINED 4
/* 0, or -EBUSY when CONTROL_MAX_JOINED calls wait on lead already (call is
 * then left to its handler). */
int control_call_join(struct control_call *lead, struct control_call *call);
/* j holds one complete object; its text is taken (j is left empty). */
void control_reply(struct control_call *call, struct json_buf *j);
/* {"error":"..."} */
void control_reply_error(struct control_call *call, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* {"ok":true} */
void control_reply_ok(struct control_call *call);

#endif
