/* The Prometheus writers (names, escaping, family grouping, histogram
 * buckets) and the endpoint's HTTP handling on a real reactor and a unix
 * socket: 200 with the fill's text, 404, 405, HEAD, malformed and oversized
 * requests closed without a reply, stop with a connection still open. */
#include "gateway/daemon_metrics.h"
#include "gateway/base/metrics.h"
#include "gateway/volume/qos.h"
#include "unit_skip.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static bool contains(const struct metrics_buf *mb, const char *s)
{
	return mb->p && strstr(mb->p, s);
}

START_TEST(counter_and_gauge_format)
{
	struct metrics_buf mb;

	metrics_buf_init(&mb);
	metrics_counter(&mb, "a_total", "Help with \\ and\nnewline.",
			(const char *[]){ "export", "e1", "x", "y", NULL }, 42);
	metrics_counter(&mb, "a_total", "ignored", (const char *[]){ "export", "e2", "x", "z", NULL },
			UINT64_MAX);
	metrics_gauge(&mb, "g", "A gauge.", NULL, 0.5);
	metrics_gauge(&mb, "g2", "", NULL, 1.0 / 0.0);
	ck_assert_str_eq(mb.p, "# HELP a_total Help with \\\\ and\\nnewline.\n"
			       "# TYPE a_total counter\n"
			       "a_total{export=\"e1\",x=\"y\"} 42\n"
			       "a_total{export=\"e2\",x=\"z\"} 18446744073709551615\n"
			       "# HELP g A gauge.\n"
			       "# TYPE g gauge\n"
			       "g 0.5\n"
			       "# HELP g2 \n"
			       "# TYPE g2 gauge\n"
			       "g2 +Inf\n");
	ck_assert_uint_eq(mb.misuse, 0);
	ck_assert(!mb.nomem);
	metrics_buf_free(&mb);
}
END_TEST

START_TEST(label_values_escaped)
{
	struct metrics_buf mb;

	metrics_buf_init(&mb);
	metrics_gauge(&mb, "g", "h", (const char *[]){ "v", "a\"b\\c\nd}e,f=g", NULL }, 1);
	ck_assert(contains(&mb, "g{v=\"a\\\"b\\\\c\\nd}e,f=g\"} 1\n"));
	metrics_buf_free(&mb);
}
END_TEST

START_TEST(refuses_what_a_scraper_would_reject)
{
	struct metrics_buf mb;

	metrics_buf_init(&mb);
	metrics_counter(&mb, "a_total", "h", NULL, 1);
	metrics_counter(&mb, "b_total", "h", NULL, 1);
	metrics_counter(&mb, "a_total", "h", NULL, 2); /* reopened */
	metrics_counter(&mb, "1bad", "h", NULL, 1);
	metrics_counter(&mb, "bad-name", "h", NULL, 1);
	metrics_counter(&mb, "c_total", "h", (const char *[]){ "le", "1", NULL }, 1);
	metrics_counter(&mb, "c_total", "h", (const char *[]){ "__x", "1", NULL }, 1);
	metrics_counter(&mb, "c_total", "h", (const char *[]){ "a-b", "1", NULL }, 1);
	metrics_counter(&mb, "c_total", "h", (const char *[]){ "a", NULL }, 1);
	ck_assert_uint_eq(mb.misuse, 7);
	ck_assert(!contains(&mb, "a_total 2"));
	ck_assert(!contains(&mb, "bad"));
	ck_assert(!contains(&mb, "c_total"));
	metrics_buf_free(&mb);
}
END_TEST

START_TEST(histogram_buckets)
{
	struct metrics_buf mb;
	struct hist h;

	hist_init(&h);
	hist_record(&h, 5000); /* 5 us */
	hist_record(&h, 30000); /* 30 us */
	hist_record(&h, 2000000); /* 2 ms */
	hist_record(&h, 20000000000ull); /* 20 s */
	metrics_buf_init(&mb);
	metrics_histogram_seconds(&mb, "lat_seconds", "h", (const char *[]){ "export", "e", NULL },
				  &h);
	ck_assert(contains(&mb, "# TYPE lat_seconds histogram\n"));
	ck_assert(contains(&mb, "lat_seconds_bucket{export=\"e\",le=\"1e-05\"} 1\n"));
	ck_assert(contains(&mb, "lat_seconds_bucket{export=\"e\",le=\"2.5e-05\"} 1\n"));
	ck_assert(contains(&mb, "lat_seconds_bucket{export=\"e\",le=\"5e-05\"} 2\n"));
	ck_assert(contains(&mb, "lat_seconds_bucket{export=\"e\",le=\"0.0025\"} 3\n"));
	ck_assert(contains(&mb, "lat_seconds_bucket{export=\"e\",le=\"10\"} 3\n"));
	ck_assert(contains(&mb, "lat_seconds_bucket{export=\"e\",le=\"+Inf\"} 4\n"));
	ck_assert(contains(&mb, "lat_seconds_count{export=\"e\"} 4\n"));
	ck_assert(contains(&mb, "lat_seconds_sum{export=\"e\"} 20.002035"));
	metrics_buf_free(&mb);
}
END_TEST

START_TEST(export_and_path_families)
{
	struct metrics_buf mb;
	struct volume *v1, *v2;
	struct reactor r;
	struct dm_export ex[3];
	struct dm_path p[2] = {
		{ .target = "t1", .index = 0, .transport = "tcp", .traddr = "127.0.0.1",
		  .trsvcid = "4420", .state = "live", .ana_state = "optimized", .reads = 5 },
		{ .target = "t1", .index = 1, .transport = "rdma", .traddr = "10.0.0.1",
		  .trsvcid = "4420", .state = "dead", .ana_state = "inaccessible", .reads = 0 },
	};

	ck_assert_int_eq(reactor_init(&r, 0, 16), 0);
	ck_assert_int_eq(vol_mem_create("e1", 1 << 20, 512, 0, 1, &v1), 0);
	ck_assert_int_eq(vol_mem_create("e2", 2 << 20, 512, 0, 1, &v2), 0);
	ck_assert_int_eq(vol_set_qos(v1, &(struct vol_qos_limits){ .iops = 300 }), 0);
	ex[0] = (struct dm_export){ .name = "e1", .target = "t1", .vol = v1 };
	ex[1] = (struct dm_export){ .name = "e2", .target = "t1", .vol = v2 };
	ex[2] = (struct dm_export){ .name = "dead", .target = "t2", .vol = NULL };
	metrics_buf_init(&mb);
	daemon_metrics_gateway(&mb, "1.2.3", 12.5);
	ck_assert_int_eq(daemon_metrics_exports(&mb, ex, 3), 0);
	daemon_metrics_paths(&mb, p, 2);
	ck_assert_uint_eq(mb.misuse, 0);
	ck_assert(contains(&mb, "nvmf_gateway_build_info{version=\"1.2.3\"} 1\n"));
	ck_assert(contains(&mb, "nvmf_gateway_export_up{export=\"dead\",target=\"t2\"} 0\n"));
	ck_assert(contains(&mb, "nvmf_gateway_export_size_bytes{export=\"e2\"} 2097152\n"));
	ck_assert(contains(&mb, "nvmf_gateway_export_qos_iops_limit{export=\"e1\"} 300\n"));
	ck_assert(contains(&mb, "nvmf_gateway_export_qos_iops_limit{export=\"e2\"} 0\n"));
	ck_assert(contains(&mb, "nvmf_gateway_export_reads_total{export=\"e1\"} 0\n"));
	ck_assert(!contains(&mb, "nvmf_gateway_export_reads_total{export=\"dead\"}"));
	ck_assert(contains(&mb, "nvmf_gateway_export_read_latency_seconds_count{export=\"e2\"} 0\n"));
	ck_assert(contains(&mb, "nvmf_gateway_path_reads_total{target=\"t1\",path=\"0\"} 5\n"));
	ck_assert(contains(&mb, "nvmf_gateway_path_state{target=\"t1\",path=\"1\",state=\"dead\"} 1\n"));
	ck_assert(contains(&mb, "nvmf_gateway_path_state{target=\"t1\",path=\"1\",state=\"live\"} 0\n"));
	ck_assert(contains(&mb, "nvmf_gateway_path_ana_state{target=\"t1\",path=\"0\","
				"ana_state=\"optimized\"} 1\n"));
	ck_assert(contains(&mb, "nvmf_gateway_path_info{target=\"t1\",path=\"1\",transport=\"rdma\","
				"traddr=\"10.0.0.1\",trsvcid=\"4420\"} 1\n"));
	metrics_buf_free(&mb);
	vol_destroy(v1);
	vol_destroy(v2);
	reactor_fini(&r);
}
END_TEST

/* ---- the server ---- */

static int fills;

static void fill(void *arg, struct metrics_buf *mb)
{
	fills++;
	metrics_counter(mb, "test_total", "t", (const char *[]){ "who", arg, NULL }, 7);
}

static int client(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Sends req, runs the reactor until the server closes, returns the reply. */
static char *exchange(struct reactor *r, const char *path, const char *req, size_t len)
{
	static char out[65536];
	size_t got = 0;
	int fd = client(path);

	ck_assert_int_eq(send(fd, req, len, 0), (ssize_t)len);
	for (int i = 0; i < 1000; i++) {
		reactor_poll(r, 10 * NSEC_PER_MSEC);
		ssize_t n = recv(fd, out + got, sizeof(out) - 1 - got, 0);
		/* Closed with our request unread: a reset. */
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			break;
		if (n > 0)
			got += (size_t)n;
		else
			ck_assert_int_eq(errno, EAGAIN);
		ck_assert_int_lt(i, 999);
	}
	out[got] = 0;
	close(fd);
	return out;
}

/* A literal request, NUL bytes inside included. */
#define EXCH(lit) exchange(&r, path, lit, sizeof(lit) - 1)

static bool stopped;
static void on_stop(void *arg)
{
	(void)arg;
	stopped = true;
}

START_TEST(server_http)
{
	char dir[] = "/tmp/test-metrics.XXXXXX", path[128], big[5000];
	struct gw_listen l;
	struct metrics_srv *s;
	struct reactor r;
	char *out;
	int idle;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/m.sock", dir);
	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	{
		char spec[160];
		snprintf(spec, sizeof(spec), "unix:%s", path);
		ck_assert_int_eq(gw_listen_parse(spec, &l), 0);
	}
	ck_assert_int_eq(metrics_start(&r, &l, fill, "me", &s), 0);

	out = EXCH("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	ck_assert_msg(!strncmp(out, "HTTP/1.0 200 OK\r\n", 17), "%s", out);
	ck_assert(strstr(out, "Content-Type: text/plain; version=0.0.4"));
	ck_assert(strstr(out, "\r\n\r\n# HELP test_total t\n# TYPE test_total counter\n"
			      "test_total{who=\"me\"} 7\n"));
	ck_assert_int_eq(fills, 1);
	/* A query string is ignored; a bare-LF client works. */
	out = EXCH("GET /metrics?x=1 HTTP/1.0\n\n");
	ck_assert(!strncmp(out, "HTTP/1.0 200 OK\r\n", 17));
	out = EXCH("HEAD /metrics HTTP/1.0\r\n\r\n");
	ck_assert(!strncmp(out, "HTTP/1.0 200 OK\r\n", 17));
	ck_assert(strstr(out, "\r\n\r\n")[4] == 0);
	out = EXCH("GET / HTTP/1.1\r\n\r\n");
	ck_assert(!strncmp(out, "HTTP/1.0 404 ", 13));
	out = EXCH("POST /metrics HTTP/1.1\r\n\r\n");
	ck_assert(!strncmp(out, "HTTP/1.0 405 ", 13));
	ck_assert(strstr(out, "Allow: GET, HEAD\r\n"));
	/* Malformed: closed, nothing sent, the fill never called. */
	fills = 0;
	ck_assert_str_eq(EXCH("GET /metrics\r\n\r\n"), "");
	ck_assert_str_eq(EXCH("GET metrics HTTP/1.1\r\n\r\n"), "");
	ck_assert_str_eq(EXCH("get /metrics HTTP/1.1\r\n\r\n"), "");
	ck_assert_str_eq(EXCH("GET /metrics HTTP/2.0\r\n\r\n"), "");
	ck_assert_str_eq(EXCH("GET /a\x01 HTTP/1.1\r\n\r\n"), "");
	ck_assert_str_eq(EXCH("GET /metrics HTTP/1.1\0\r\n\r\n"), "");
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /", 5);
	ck_assert_str_eq(exchange(&r, path, big, sizeof(big)), "");
	ck_assert_int_eq(fills, 0);
	/* Still serving. */
	out = EXCH("GET /metrics HTTP/1.1\r\n\r\n");
	ck_assert(!strncmp(out, "HTTP/1.0 200 OK\r\n", 17));

	/* Stop with a client that never sent anything. */
	idle = client(path);
	reactor_poll(&r, 10 * NSEC_PER_MSEC);
	metrics_stop(s, on_stop, NULL);
	for (int i = 0; i < 100 && !stopped; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert(stopped);
	ck_assert_int_ne(access(path, F_OK), 0);
	close(idle);
	gw_listen_free(&l);
	reactor_fini(&r);
	rmdir(dir);
}
END_TEST

START_TEST(start_errors)
{
	struct gw_listen l = { .kind = GW_LISTEN_NONE };
	struct metrics_srv *s;
	struct reactor r;

	ck_assert_int_eq(reactor_init(&r, 0, 16), 0);
	ck_assert_int_eq(metrics_start(&r, &l, fill, NULL, &s), -EINVAL);
	ck_assert_int_eq(gw_listen_parse("unix:/nonexistent-dir/x/m.sock", &l), 0);
	ck_assert_int_lt(metrics_start(&r, &l, fill, NULL, &s), 0);
	gw_listen_free(&l);
	reactor_fini(&r);
}
END_TEST

/* The request parser alone: each verdict, and the buffer fed piecewise. */
static enum metrics_http parse(const char *req, struct metrics_http_req *q)
{
	static char buf[METRICS_REQ_MAX];
	size_t n = strlen(req);

	ck_assert_uint_lt(n, sizeof(buf));
	memcpy(buf, req, n + 1);
	return metrics_http_parse(buf, n, q);
}

START_TEST(http_parse_verdicts)
{
	struct metrics_http_req q;

	ck_assert_int_eq(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n", &q), METRICS_HTTP_MORE);
	ck_assert_int_eq(parse("GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", &q),
			 METRICS_HTTP_METRICS);
	ck_assert(!q.head);
	ck_assert_int_eq(parse("HEAD /metrics HTTP/1.0\n\n", &q), METRICS_HTTP_METRICS);
	ck_assert(q.head);
	ck_assert_int_eq(parse("GET /other HTTP/1.0\n\n", &q), METRICS_HTTP_NOT_FOUND);
	ck_assert_str_eq(q.target, "/other");
	ck_assert_int_eq(parse("POST /metrics HTTP/1.1\n\n", &q), METRICS_HTTP_METHOD);
	ck_assert_uint_eq(q.method_len, 4);
	ck_assert_int_eq(parse("GET  /metrics HTTP/1.1\n\n", &q), METRICS_HTTP_MALFORMED);
	ck_assert_int_eq(parse("get /metrics HTTP/1.1\n\n", &q), METRICS_HTTP_MALFORMED);
	ck_assert_str_eq(q.why, "bad method");
	ck_assert_int_eq(parse("GET /metrics HTTP/2\n\n", &q), METRICS_HTTP_MALFORMED);
	ck_assert_int_eq(parse("\n\n", &q), METRICS_HTTP_MALFORMED);

	static char big[METRICS_REQ_MAX];
	memset(big, 'a', METRICS_REQ_MAX - 1);
	big[METRICS_REQ_MAX - 1] = 0;
	ck_assert_int_eq(metrics_http_parse(big, METRICS_REQ_MAX - 1, &q), METRICS_HTTP_MALFORMED);
	ck_assert_str_eq(q.why, "header block over 4 KiB");

	char nul[] = "GET /metrics HTTP/1.1\0\n\n";
	ck_assert_int_eq(metrics_http_parse(nul, sizeof(nul) - 1, &q), METRICS_HTTP_MALFORMED);
	ck_assert_str_eq(q.why, "NUL byte");
}
END_TEST

int main(void)
{
	unit_need_io_uring();
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, counter_and_gauge_format);
	tcase_add_test(tc, label_values_escaped);
	tcase_add_test(tc, refuses_what_a_scraper_would_reject);
	tcase_add_test(tc, histogram_buckets);
	tcase_add_test(tc, export_and_path_families);
	tcase_add_test(tc, server_http);
	tcase_add_test(tc, http_parse_verdicts);
	tcase_add_test(tc, start_errors);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
