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

#include "gateway/json.h"
#include "gateway/reactor.h"

#define CONTROL_LINE_MAX (64 * 1024)

struct control_srv;
struct control_call;

/* req is an object with a string member "cmd"; valid during the call
 * only.  The handler answers with one of the control_reply* functions,
 * now or later, exactly once. */
typedef void control_handle_fn(void *arg, struct control_call *call, const struct json_val *req);

/* Listens on path (a stale socket file is replaced, a live server's is
 * not: -EADDRINUSE) and serves on r.  0 or -errno (logged). */
int control_start(struct reactor *r, const char *path, control_handle_fn *fn, void *arg,
		  struct control_srv **out);
/* Closes the listener and idle connections; a connection with a call
 * outstanding closes once it is answered.  done(arg) runs on the reactor
 * when nothing is left; the socket file is removed. */
void control_stop(struct control_srv *s, void (*done)(void *), void *arg);

/* j holds one complete object; its text is taken (j is left empty). */
void control_reply(struct control_call *call, struct json_buf *j);
/* {"error":"..."} */
void control_reply_error(struct control_call *call, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* {"ok":true} */
void control_reply_ok(struct control_call *call);

#endif
