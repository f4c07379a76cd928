/* A Prometheus text-format endpoint (exposition format 0.0.4) and the
 * writers that fill it.  The server knows nothing of what it exports: on
 * each GET /metrics it calls fill(arg, mb) on its reactor and sends what
 * fill wrote.  HTTP is the least a scraper needs: one request per
 * connection, answered and closed ("Connection: close"); GET and HEAD of
 * /metrics (a query string is ignored), 404 for other paths, 405 for other
 * methods; a malformed or oversized request, or one not complete within 10
 * seconds, closes its connection with a log line saying why.  No
 * authentication: listen on loopback or a unix socket. */
#ifndef GW_METRICS_H
#define GW_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/base/listen.h"
#include "gateway/base/histogram.h"
#include "gateway/base/reactor.h"

/* The text being built.  Each writer appends one sample (and the family's
 * HELP and TYPE lines before its first sample); the samples of a family
 * must be written together, all of one family before the next, or the
 * writer refuses (logged, counted in misuse) rather than emit text a
 * scraper rejects. */
struct metrics_buf {
	char *p;
	size_t len, cap;
	bool nomem;
	unsigned misuse; /* refused writes: bad names, a family reopened */
	char **families; /* names written so far */
	size_t nr_families, cap_families;
};

void metrics_buf_init(struct metrics_buf *mb);
void metrics_buf_free(struct metrics_buf *mb);

/* labels: NULL, or name/value pairs ending with a NULL name:
 * (const char *[]){ "export", "e1", NULL }.  Values are escaped. */
void metrics_counter(struct metrics_buf *mb, const char *name, const char *help,
		     const char *const *labels, uint64_t value);
void metrics_gauge(struct metrics_buf *mb, const char *name, const char *help,
		   const char *const *labels, double value);
/* h holds nanoseconds; written as NAME_bucket{le=SECONDS} (cumulative, on
 * fixed bounds from 10 us to 10 s, then +Inf), NAME_sum in seconds and
 * NAME_count. */
void metrics_histogram_seconds(struct metrics_buf *mb, const char *name, const char *help,
			       const char *const *labels, const struct hist *h);

struct metrics_srv;
typedef void metrics_fill_fn(void *arg, struct metrics_buf *mb);

/* The request parser, apart from the socket so that it can be driven byte
 * by byte (tests/fuzz/fuzz_metrics_http.c).  buf holds the len bytes
 * received so far and a NUL after them (room for METRICS_REQ_MAX bytes in
 * all); it is modified in place. */
#define METRICS_REQ_MAX 4096

enum metrics_http {
	METRICS_HTTP_MORE, /* no complete header block: read more */
	METRICS_HTTP_MALFORMED, /* close without a reply; why says it */
	METRICS_HTTP_METHOD, /* 405: not GET or HEAD */
	METRICS_HTTP_NOT_FOUND, /* 404 */
	METRICS_HTTP_METRICS, /* 200 with the text (head: headers only) */
};

struct metrics_http_req {
	const char *why; /* MALFORMED */
	const char *method; /* METHOD, NOT_FOUND, METRICS: in buf */
	size_t method_len;
	const char *target; /* NOT_FOUND, METRICS: NUL-terminated, query cut */
	bool head;
};

enum metrics_http metrics_http_parse(char *buf, size_t len, struct metrics_http_req *out);

/* Listens on l (unix or tcp; tcp without a host is 127.0.0.1) and serves
 * on r.  0, or -errno (logged). */
int metrics_start(struct reactor *r, const struct gw_listen *l, metrics_fill_fn *fill, void *arg,
		  struct metrics_srv **out);
/* Closes the listener and every connection; done(arg) runs on the
 * reactor once nothing is left, and the server is freed. */
void metrics_stop(struct metrics_srv *s, void (*done)(void *), void *arg);

#endif
