/* libFuzzer harness for the metrics endpoint's HTTP request parser, fed
 * as the server feeds it: recv chunks (sizes chosen by the input) into a
 * 4 KiB buffer, parsed after each.  Two kinds of input, by byte 0:
 * - raw bytes: whatever the verdict, it must agree with an independent
 *   reading of the request line (two spaces, an upper-case method, an
 *   absolute target of visible characters, HTTP/1.0 or 1.1), and a recv is
 *   never armed with no room;
 * - a well-formed request built from the input (method, target, query,
 *   version, header lines, CRLF or LF): it must get exactly the answer it
 *   asks for, never "malformed". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "gateway/base/metrics.h"

#include "tests/fuzz/fuzz_check.h"

static uint32_t rnd;

static size_t next_chunk(size_t room)
{
	rnd = rnd * 1103515245u + 12345u;
	return 1 + (rnd >> 8) % room;
}

/* Feeds s as the server does; the verdict, and in *used how many bytes
 * were received when it came. */
static enum metrics_http feed(const char *s, size_t n, char *buf, struct metrics_http_req *q,
			      size_t *used)
{
	size_t len = 0;
	enum metrics_http v = METRICS_HTTP_MORE;

	while (len < n) {
		size_t room = METRICS_REQ_MAX - 1 - len;
		check(room > 0);
		size_t k = next_chunk(room);
		if (k > n - len)
			k = n - len;
		memcpy(buf + len, s + len, k);
		len += k;
		buf[len] = 0;
		v = metrics_http_parse(buf, len, q);
		if (v != METRICS_HTTP_MORE)
			break;
	}
	*used = len;
	return v;
}

/* The request line read independently of the parser. */
static void check_raw(const char *s, size_t used, enum metrics_http v,
		      const struct metrics_http_req *q)
{
	char line[METRICS_REQ_MAX];
	size_t n = strcspn(s, "\r\n"); /* s is NUL-terminated at used */

	if (v == METRICS_HTTP_MORE) {
		check(!memchr(s, 0, used) && used < METRICS_REQ_MAX - 1);
		check(!strstr(s, "\n\n") && !strstr(s, "\r\n\r\n"));
		return;
	}
	if (v == METRICS_HTTP_MALFORMED) {
		check(q->why && q->why[0]);
		return;
	}
	check(!memchr(s, 0, used));
	check(strstr(s, "\n\n") || strstr(s, "\r\n\r\n"));
	memcpy(line, s, n);
	line[n] = 0;
	char *sp1 = strchr(line, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	check(sp1 && sp2 && !strchr(sp2 + 1, ' '));
	check(!strcmp(sp2 + 1, "HTTP/1.0") || !strcmp(sp2 + 1, "HTTP/1.1"));
	check(sp1 > line && sp2 > sp1 + 1 && sp1[1] == '/');
	for (char *p = line; p < sp1; p++)
		check(*p >= 'A' && *p <= 'Z');
	for (char *p = sp1 + 1; p < sp2; p++)
		check((unsigned char)*p > ' ' && (unsigned char)*p < 0x7f);
	check(q->method_len == (size_t)(sp1 - line));
	bool get = q->method_len == 3 && !memcmp(line, "GET", 3);
	bool head = q->method_len == 4 && !memcmp(line, "HEAD", 4);
	check(q->head == head);
	if (v == METRICS_HTTP_METHOD) {
		check(!get && !head);
		return;
	}
	check(get || head);
	*sp2 = 0;
	sp1[1 + strcspn(sp1 + 1, "?")] = 0;
	check(!strcmp(q->target, sp1 + 1));
	check((v == METRICS_HTTP_METRICS) == !strcmp(sp1 + 1, "/metrics"));
}

static void well_formed(const uint8_t *d, size_t n, char *buf)
{
	static const char *const methods[] = { "GET", "HEAD", "POST", "DELETE" };
	static const char *const targets[] = { "/metrics", "/", "/metrics/", "/metricsx" };
	char req[METRICS_REQ_MAX];
	size_t len = 0;
	struct metrics_http_req q;
	size_t used;

	if (n < 2)
		return;
	const char *m = methods[d[0] & 3], *t = targets[(d[0] >> 2) & 3];
	const char *eol = (d[0] & 0x40) ? "\r\n" : "\n";
	bool query = d[0] & 0x10;
	len += (size_t)snprintf(req, sizeof(req), "%s %s%s HTTP/1.%d%s", m, t, query ? "?x=1" : "",
				(d[0] >> 5) & 1, eol);
	/* Header lines of visible characters from the rest (no blank line). */
	size_t col = 0;
	for (size_t i = 1; i < n && len < 3000; i++) {
		char c = (char)(' ' + d[i] % 95);
		if (d[i] >= 0xf0 && col) {
			len += (size_t)snprintf(req + len, sizeof(req) - len, "%s", eol);
			col = 0;
			continue;
		}
		req[len++] = c;
		col++;
	}
	if (col)
		len += (size_t)snprintf(req + len, sizeof(req) - len, "%s", eol);
	len += (size_t)snprintf(req + len, sizeof(req) - len, "%s", eol);
	enum metrics_http v = feed(req, len, buf, &q, &used);
	bool ok_method = !strcmp(m, "GET") || !strcmp(m, "HEAD");
	if (!ok_method)
		check(v == METRICS_HTTP_METHOD);
	else if (!strcmp(t, "/metrics"))
		check(v == METRICS_HTTP_METRICS && q.head == !strcmp(m, "HEAD"));
	else
		check(v == METRICS_HTTP_NOT_FOUND && !strcmp(q.target, t));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[METRICS_REQ_MAX];
	struct metrics_http_req q;
	size_t used;

	log_set_level(LOG_LVL_ERR);
	if (size < 5)
		return 0;
	memcpy(&rnd, data + 1, 4);
	if (data[0] & 1) {
		well_formed(data + 5, size - 5, buf);
		return 0;
	}
	const char *s = (const char *)data + 5;
	size -= 5;
	enum metrics_http v = feed(s, size, buf, &q, &used);
	char copy[METRICS_REQ_MAX];
	memcpy(copy, s, used);
	copy[used] = 0;
	check_raw(copy, used, v, &q);
	return 0;
}
