/* The control socket server on a reactor, with a client in the same
 * thread: replies in order (also when the handler answers later), errors
 * for malformed lines on that connection only, mode 0600, stop with a
 * call outstanding, calls joined to another's reply. */
#include "gateway/base/control.h"
#include "gateway/base/log.h"
#include "unit_skip.h"
#include "log_capture.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static struct reactor r;
static struct control_srv *srv;
static char path[64];
static struct control_call *later_call;
static struct control_call *joiners[8];
static unsigned calls, nr_joiners;
static bool stopped;

static void handler(void *arg, struct control_call *call, const struct json_val *req)
{
	const char *cmd = json_get_str(req, "cmd");
	(void)arg;

	calls++;
	if (!strcmp(cmd, "later")) {
		later_call = call; /* answered by the test */
		return;
	}
	if (!strcmp(cmd, "join")) {
		ck_assert_ptr_nonnull(later_call);
		ck_assert_uint_lt(nr_joiners, 8);
		if (control_call_join(later_call, call) < 0)
			return control_reply_error(call, "busy");
		joiners[nr_joiners++] = call;
		return;
	}
	if (!strcmp(cmd, "big")) {
		/* 4 MiB: more than the socket takes while the client does not read */
		size_t n = 4u << 20;
		char *big = malloc(n);
		ck_assert_ptr_nonnull(big);
		memset(big, 'x', n - 1);
		big[n - 1] = 0;
		struct json_buf j;
		json_buf_init(&j);
		json_obj_begin(&j);
		json_kv_str(&j, "big", big);
		json_obj_end(&j);
		free(big);
		control_reply(call, &j);
		return;
	}
	if (!strcmp(cmd, "fail"))
		return control_reply_error(call, "failed as asked");
	struct json_buf j;
	json_buf_init(&j);
	json_obj_begin(&j);
	json_kv_str(&j, "echo", cmd);
	json_obj_end(&j);
	control_reply(call, &j);
}

static void setup(void)
{
	strcpy(path, "/tmp/test_control.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(path));
	strcat(path, "/c.sock");
	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	ck_assert_int_eq(control_start(&r, path, handler, NULL, &srv), 0);
	calls = 0;
	nr_joiners = 0;
	later_call = NULL;
	stopped = false;
}

#define TEST_DEADLINE_NS NSEC_PER_SEC
static void short_deadline(void)
{
	control_set_client_deadline(srv, TEST_DEADLINE_NS);
}

static void on_stopped(void *arg)
{
	(void)arg;
	stopped = true;
}

static void teardown(void)
{
	if (srv) {
		control_stop(srv, on_stopped, NULL);
		for (int i = 0; i < 100 && !stopped; i++)
			reactor_poll(&r, 10 * NSEC_PER_MSEC);
		ck_assert(stopped);
		srv = NULL;
	}
	reactor_fini(&r);
	*strrchr(path, '/') = 0;
	rmdir(path);
}

static int client(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	strcpy(a.sun_path, path);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static void send_str(int fd, const char *s)
{
	ck_assert_int_eq(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* Runs the reactor until fd has n newlines (or 2 s pass); returns them. */
static char *recv_lines(int fd, unsigned n)
{
	static char buf[8192];
	size_t len = 0;
	unsigned got = 0;

	for (int i = 0; i < 200 && got < n; i++) {
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
		ssize_t k = recv(fd, buf + len, sizeof(buf) - 1 - len, MSG_DONTWAIT);
		if (k > 0) {
			for (ssize_t x = 0; x < k; x++)
				got += buf[len + x] == '\n';
			len += (size_t)k;
		}
	}
	buf[len] = 0;
	return buf;
}

START_TEST(mode_and_echo)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	int fd = client();
	send_str(fd, "{\"cmd\":\"hello\"}\n");
	ck_assert_str_eq(recv_lines(fd, 1), "{\"echo\":\"hello\"}\n");
	close(fd);
}
END_TEST

START_TEST(pipelined_in_order_with_late_reply)
{
	int fd = client();

	/* three requests in one write; the first is answered later */
	send_str(fd, "{\"cmd\":\"later\"}\n{\"cmd\":\"a\"}\r\n\n{\"cmd\":\"fail\"}\n");
	char *got = recv_lines(fd, 1);
	ck_assert_str_eq(got, ""); /* nothing overtakes the late reply */
	ck_assert_ptr_nonnull(later_call);
	ck_assert_uint_eq(calls, 1);
	control_reply_ok(later_call);
	got = recv_lines(fd, 3);
	ck_assert_str_eq(got, "{\"ok\":true}\n{\"echo\":\"a\"}\n{\"error\":\"failed as asked\"}\n");
	close(fd);
}
END_TEST

/* Runs the reactor until the handler has seen n calls (or 2 s pass). */
static void until_calls(unsigned n)
{
	for (int i = 0; i < 200 && calls < n; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert_uint_eq(calls, n);
}

/* Calls joined to a lead get its reply when it gets it, each on its own
 * connection, which then goes on; one whose client left is freed. */
START_TEST(joined_calls_get_the_lead_reply)
{
	int lead = client(), a = client(), gone = client(), b = client();

	send_str(lead, "{\"cmd\":\"later\"}\n");
	until_calls(1);
	ck_assert_ptr_nonnull(later_call);
	send_str(a, "{\"cmd\":\"join\"}\n");
	until_calls(2);
	send_str(gone, "{\"cmd\":\"join\"}\n");
	until_calls(3);
	send_str(b, "{\"cmd\":\"join\"}\n{\"cmd\":\"after\"}\n");
	until_calls(4);
	ck_assert_str_eq(recv_lines(b, 1), ""); /* owed, not answered */
	ck_assert_uint_eq(nr_joiners, 3);
	close(gone);
	control_reply_error(later_call, "stopping");
	ck_assert_str_eq(recv_lines(lead, 1), "{\"error\":\"stopping\"}\n");
	ck_assert_str_eq(recv_lines(a, 1), "{\"error\":\"stopping\"}\n");
	/* b's next request is answered after the joined reply. */
	ck_assert_str_eq(recv_lines(b, 2), "{\"error\":\"stopping\"}\n{\"echo\":\"after\"}\n");
	close(lead);
	close(a);
	close(b);
}
END_TEST

/* Review: joined calls hold their connections until answered, so their
 * number is bounded; one more is answered at once. */
START_TEST(joined_calls_bounded)
{
	int lead = client(), j[CONTROL_MAX_JOINED + 1];

	send_str(lead, "{\"cmd\":\"later\"}\n");
	until_calls(1);
	for (unsigned i = 0; i <= CONTROL_MAX_JOINED; i++) {
		j[i] = client();
		send_str(j[i], "{\"cmd\":\"join\"}\n");
		until_calls(2 + i);
	}
	ck_assert_uint_eq(nr_joiners, CONTROL_MAX_JOINED);
	ck_assert_str_eq(recv_lines(j[CONTROL_MAX_JOINED], 1), "{\"error\":\"busy\"}\n");
	control_reply_error(later_call, "done");
	ck_assert_str_eq(recv_lines(lead, 1), "{\"error\":\"done\"}\n");
	for (unsigned i = 0; i < CONTROL_MAX_JOINED; i++)
		ck_assert_str_eq(recv_lines(j[i], 1), "{\"error\":\"done\"}\n");
	for (unsigned i = 0; i <= CONTROL_MAX_JOINED; i++)
		close(j[i]);
	close(lead);
}
END_TEST

START_TEST(bad_lines_isolated)
{
	int bad = client(), good = client();

	send_str(bad, "nonsense\n{\"nocmd\":1}\n\"str\"\n{\"cmd\":\"ok\"}\n");
	send_str(good, "{\"cmd\":\"other\"}\n");
	char *got = recv_lines(bad, 4);
	ck_assert_msg(strstr(got, "{\"error\":\"bad JSON: offset 0: bad literal\"}\n") == got, "%s",
		      got);
	ck_assert(strstr(got, "\"cmd\\\"\"}\n{\"error\":\"a request is an object"));
	ck_assert(strstr(got, "}\n{\"echo\":\"ok\"}\n"));
	ck_assert_str_eq(recv_lines(good, 1), "{\"echo\":\"other\"}\n");
	ck_assert_uint_eq(calls, 2);
	close(bad);
	close(good);
}
END_TEST

/* Issue 14 defect 5: the line was copied with strndup, which stops at the
 * NUL, and then handled with the full length (heap-buffer-overflow under
 * ASan).  A line with a NUL gets an error naming it; the connection goes on. */
START_TEST(nul_in_line)
{
	static const char req[] = "\0AAAA\r\n{\"cmd\":\"x\0y\"}\n{\"cmd\":\"after\"}\n";
	int fd = client();

	ck_assert_int_eq(send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(req) - 1);
	char *got = recv_lines(fd, 3);
	ck_assert_str_eq(got, "{\"error\":\"a request line holds a NUL byte (offset 0)\"}\n"
			      "{\"error\":\"a request line holds a NUL byte (offset 9)\"}\n"
			      "{\"echo\":\"after\"}\n");
	ck_assert_uint_eq(calls, 1);
	close(fd);
}
END_TEST

/* The framing alone, as fuzz_control drives it: a small limit, an
 * over-long line refused once and skipped to its newline, a last line
 * without newline at end of input. */
START_TEST(framing_without_socket)
{
	static const char in[] = "ok\nmuch too long\nb\ntail";
	struct control_lines lb = { .buf = malloc(9), .cap = 8 };
	char *line;
	size_t len, pos = 0;
	char got[128] = "";

	ck_assert_ptr_nonnull(lb.buf);
	for (bool eof = false;;) {
		enum control_take t = control_lines_take(&lb, &line, &len);
		if (t == CONTROL_TAKE_MORE) {
			if (eof)
				break;
			if (pos == sizeof(in) - 1) {
				control_lines_eof(&lb);
				eof = true;
				continue;
			}
			ck_assert_uint_lt(lb.len, lb.cap);
			lb.buf[lb.len++] = in[pos++]; /* one byte per recv */
			continue;
		}
		if (t == CONTROL_TAKE_TOO_LONG) {
			strcat(got, "<too long>");
			continue;
		}
		ck_assert_int_eq(t, CONTROL_TAKE_LINE);
		ck_assert_uint_eq(strlen(line), len);
		strcat(got, "[");
		strcat(got, line);
		strcat(got, "]");
		free(line);
	}
	ck_assert_str_eq(got, "[ok]<too long>[b][tail]");
	free(lb.buf);
}
END_TEST

START_TEST(last_line_without_newline)
{
	int fd = client();

	send_str(fd, "{\"cmd\":\"tail\"}");
	shutdown(fd, SHUT_WR);
	ck_assert_str_eq(recv_lines(fd, 1), "{\"echo\":\"tail\"}\n");
	close(fd);
}
END_TEST

START_TEST(stop_waits_for_outstanding_call)
{
	int fd = client();

	send_str(fd, "{\"cmd\":\"later\"}\n");
	recv_lines(fd, 0);
	for (int i = 0; i < 50 && !later_call; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert_ptr_nonnull(later_call);
	control_stop(srv, on_stopped, NULL);
	srv = NULL;
	for (int i = 0; i < 20; i++)
		reactor_poll(&r, 5 * NSEC_PER_MSEC);
	ck_assert(!stopped); /* the call is still owed */
	control_reply_ok(later_call);
	for (int i = 0; i < 100 && !stopped; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert(stopped);
	ck_assert_int_eq(access(path, F_OK), -1); /* the socket file is gone */
	close(fd);
}
END_TEST

/* A reply handed over just as the server stops (a reload that finished as
 * SIGTERM came) reaches the client: it used to be cut by the stop's
 * shutdown while its send was in the ring. */
START_TEST(stop_delivers_reply_being_sent)
{
	int fd = client();

	send_str(fd, "{\"cmd\":\"later\"}\n");
	recv_lines(fd, 0);
	for (int i = 0; i < 50 && !later_call; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert_ptr_nonnull(later_call);
	control_reply_ok(later_call); /* its send is queued, not done */
	control_stop(srv, on_stopped, NULL);
	srv = NULL;
	ck_assert_str_eq(recv_lines(fd, 1), "{\"ok\":true}\n");
	for (int i = 0; i < 100 && !stopped; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert(stopped);
	close(fd);
}
END_TEST

/* A call still owed when the stop grace (5 s; 1 s here) ends keeps its connection
 * (the call lives in it): answered later, it is delivered, then the server
 * finishes.  Freed at the grace, the late reply was a use-after-free. */
START_TEST(owed_call_outlives_grace)
{
	int fd = client();

	send_str(fd, "{\"cmd\":\"later\"}\n");
	recv_lines(fd, 0);
	for (int i = 0; i < 50 && !later_call; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert_ptr_nonnull(later_call);
	control_set_stop_grace(srv, NSEC_PER_SEC);
	control_stop(srv, on_stopped, NULL);
	srv = NULL;
	/* Half a second past the grace, by the reactor's clock. */
	for (uint64_t t0 = reactor_now_ns(); reactor_now_ns() - t0 < 1500 * NSEC_PER_MSEC;)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert(!stopped);
	control_reply_ok(later_call);
	ck_assert_str_eq(recv_lines(fd, 1), "{\"ok\":true}\n");
	for (int i = 0; i < 100 && !stopped; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert(stopped);
	close(fd);
}
END_TEST

/* A client that does not read its reply cannot hold the stop: cut after
 * the grace (1 s here; counted in reactor polls of 10 ms, bounded at 15 s). */
START_TEST(unread_reply_cut_after_grace)
{
	int fd = client();

	send_str(fd, "{\"cmd\":\"big\"}\n");
	for (int i = 0; i < 50; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	control_set_stop_grace(srv, NSEC_PER_SEC);
	uint64_t t0 = reactor_now_ns();
	control_stop(srv, on_stopped, NULL);
	srv = NULL;
	for (int i = 0; i < 1500 && !stopped; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert(stopped);
	/* Cut at the grace, not before it. */
	ck_assert_uint_ge(reactor_now_ns() - t0, 900 * NSEC_PER_MSEC);
	close(fd);
}
END_TEST

/* Review: the "cmd" string was logged as it came, so a client could end
 * the line and write one of its own ("\n<3>..." is an error entry in the
 * journal).  Now its bytes other than printable ASCII show as '?'. */
START_TEST(cmd_logged_printable)
{
	int fd = client();
	enum log_level lvl = log_get_level();
	struct log_capture cap;
	char text[4096];

	log_capture_begin(&cap);
	log_set_level(LOG_LVL_INFO);
	send_str(fd, "{\"cmd\":\"x\\n<3>forged\\r\\u001b[2J\"}\n");
	recv_lines(fd, 1);
	log_set_level(lvl);
	log_capture_end(&cap, text, sizeof(text));
	fputs(text, stderr);
	ck_assert_uint_eq(calls, 1);
	ck_assert_msg(strstr(text, "control: client 1: x?<3>forged??[2J\n"), "%s", text);
	ck_assert_msg(!strstr(text, "\n<3>"), "a forged line: %s", text);
	close(fd);
}
END_TEST

/* Polls the reactor until a new client's request is answered; returns
 * the ns it took, or 0 if none was within 40 s.  Each attempt is a new
 * connection: a full server takes one and closes it at once. */
static uint64_t until_served(void)
{
	uint64_t t0 = reactor_now_ns();

	while (reactor_now_ns() - t0 < 40 * NSEC_PER_SEC) {
		int fd = client();
		send_str(fd, "{\"cmd\":\"status\"}\n");
		bool ok = !strcmp(recv_lines(fd, 1), "{\"echo\":\"status\"}\n");
		close(fd);
		if (ok)
			return reactor_now_ns() - t0;
	}
	return 0;
}

/* Whether the server closed fd (EOF within 5 s of reactor polls). */
static bool closed_by_server(int fd)
{
	char b;

	for (int i = 0; i < 500; i++) {
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
		if (recv(fd, &b, 1, MSG_DONTWAIT) == 0)
			return true;
	}
	return false;
}

/* Review: 16 connections that send nothing took every place, for ever
 * ("16 clients connected already"): status and reload were refused.  Now
 * each is closed once it has sent no request for the deadline. */
START_TEST(idle_clients_closed_after_deadline)
{
	int fd[16];
	uint64_t t0 = reactor_now_ns(), took;

	for (unsigned i = 0; i < 16; i++)
		fd[i] = client();
	recv_lines(fd[0], 0);
	/* The places are taken: one more is refused. */
	int extra = client();
	send_str(extra, "{\"cmd\":\"status\"}\n");
	ck_assert_str_eq(recv_lines(extra, 1), "");
	close(extra);
	took = until_served();
	ck_assert_msg(took, "no request answered in 40 s with 16 idle clients");
	/* Not before the client had its deadline (the same clock). */
	ck_assert_uint_ge(reactor_now_ns() - t0, TEST_DEADLINE_NS);
	for (unsigned i = 0; i < 16; i++) {
		ck_assert(closed_by_server(fd[i]));
		close(fd[i]);
	}
}
END_TEST

/* Review: a client that pipelines requests and never reads its replies
 * held its place for ever.  16 of them, each owed a 4 MiB reply it does
 * not take: each is closed at the deadline, and status is served. */
START_TEST(unread_replies_closed_after_deadline)
{
	int fd[16];

	for (unsigned i = 0; i < 16; i++) {
		fd[i] = client();
		send_str(fd[i], "{\"cmd\":\"big\"}\n{\"cmd\":\"big\"}\n");
	}
	until_calls(16);
	ck_assert_msg(until_served(), "no request answered in 40 s with 16 non-reading clients");
	for (unsigned i = 0; i < 16; i++)
		close(fd[i]);
}
END_TEST

/* The deadline is the client's, not ours: a call answered long after it
 * (a reload behind a change) still reaches its client, whose connection
 * then serves on; a client idle for less than the deadline is served. */
START_TEST(late_reply_not_cut_by_deadline)
{
	int fd = client(), quiet = client();
	uint64_t t0;

	send_str(fd, "{\"cmd\":\"later\"}\n");
	until_calls(1);
	ck_assert_ptr_nonnull(later_call);
	t0 = reactor_now_ns();
	while (reactor_now_ns() - t0 < TEST_DEADLINE_NS + 2 * NSEC_PER_SEC)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	control_reply_ok(later_call);
	ck_assert_str_eq(recv_lines(fd, 1), "{\"ok\":true}\n");
	send_str(fd, "{\"cmd\":\"again\"}\n");
	ck_assert_str_eq(recv_lines(fd, 1), "{\"echo\":\"again\"}\n");
	close(fd);
	/* quiet was idle past the deadline: closed. */
	ck_assert(closed_by_server(quiet));
	close(quiet);
}
END_TEST

START_TEST(second_server_refused)
{
	struct control_srv *other = NULL;

	ck_assert_int_eq(control_start(&r, path, handler, NULL, &other), -EADDRINUSE);
	ck_assert_ptr_null(other);
}
END_TEST

int main(void)
{
	unit_need_io_uring();
	Suite *s = suite_create("control");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, mode_and_echo);
	tcase_add_test(tc, pipelined_in_order_with_late_reply);
	tcase_add_test(tc, joined_calls_get_the_lead_reply);
	tcase_add_test(tc, joined_calls_bounded);
	tcase_add_test(tc, bad_lines_isolated);
	tcase_add_test(tc, nul_in_line);
	tcase_add_test(tc, framing_without_socket);
	tcase_add_test(tc, last_line_without_newline);
	tcase_add_test(tc, stop_waits_for_outstanding_call);
	tcase_add_test(tc, second_server_refused);
	tcase_add_test(tc, stop_delivers_reply_being_sent);
	tcase_add_test(tc, owed_call_outlives_grace);
	tcase_add_test(tc, unread_reply_cut_after_grace);
	tcase_add_test(tc, cmd_logged_printable);
	tcase_set_timeout(tc, 40);
	suite_add_tcase(s, tc);
	/* Each waits out the client deadline, made 1 s here
	 * (control_set_client_deadline): the mechanism, not the value. */
	tc = tcase_create("deadline");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_checked_fixture(tc, short_deadline, NULL);
	tcase_add_test(tc, idle_clients_closed_after_deadline);
	tcase_add_test(tc, unread_replies_closed_after_deadline);
	tcase_add_test(tc, late_reply_not_cut_by_deadline);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
