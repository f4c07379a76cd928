/* gateway/base/pipe_sink: the pipe always holds prefix + filled bytes;
 * giving the payload back puts it in the buffer and keeps the prefix; a
 * blocking socket with nothing in it never blocks a splice from it; a full
 * socket says EAGAIN. */
#include "gateway/base/pipe_sink.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 11));
}

/* Everything the pipe holds, non-blocking. */
static size_t drain(struct pipe_sink *s, uint8_t *out, size_t cap)
{
	size_t got = 0;
	ssize_t r;

	while (got < cap && (r = read(s->rfd, out + got, cap - got)) > 0)
		got += (size_t)r;
	return got;
}

START_TEST(prefix_put_unsplice_keeps_prefix)
{
	struct pipe_sink s;
	static uint8_t data[20000], back[20000], all[30000];
	struct iovec iov = { back, sizeof(back) };

	ck_assert_int_eq(pipe_sink_open(&s, 0), 0);
	ck_assert_uint_ge(s.cap, 4096);
	ck_assert_int_eq(pipe_sink_set_prefix(&s, "HEADER-16-BYTES!", 16), 0);
	/* A second prefix, or one while payload is in, is refused. */
	ck_assert_int_eq(pipe_sink_set_prefix(&s, "x", 1), -EINVAL);
	fill(data, sizeof(data), 1);
	ck_assert_int_eq(pipe_sink_put(&s, data, 5000), 0);
	ck_assert_int_eq(pipe_sink_put(&s, data + 5000, 15000), 0);
	ck_assert_uint_eq(s.filled, 20000);
	ck_assert_int_eq(pipe_sink_unsplice(&s, &iov, 1), 0);
	ck_assert_mem_eq(back, data, sizeof(data));
	ck_assert_uint_eq(s.filled, 0);
	/* Only the prefix is left, as before the payload began. */
	ck_assert_uint_eq(drain(&s, all, sizeof(all)), 16);
	ck_assert_mem_eq(all, "HEADER-16-BYTES!", 16);
	pipe_sink_close(&s);
}
END_TEST

START_TEST(reset_and_empty)
{
	struct pipe_sink s;
	uint8_t data[3000], all[8192];

	fill(data, sizeof(data), 2);
	ck_assert_int_eq(pipe_sink_open(&s, 0), 0);
	ck_assert_int_eq(pipe_sink_set_prefix(&s, "abcd", 4), 0);
	ck_assert_int_eq(pipe_sink_put(&s, data, sizeof(data)), 0);
	ck_assert_int_eq(pipe_sink_reset(&s), 0);
	ck_assert_uint_eq(s.filled, 0);
	ck_assert_uint_eq(s.prefix_len, 4);
	ck_assert_int_eq(pipe_sink_put(&s, data, 100), 0);
	ck_assert_uint_eq(drain(&s, all, sizeof(all)), 104);
	ck_assert_mem_eq(all, "abcd", 4);
	ck_assert_mem_eq(all + 4, data, 100);
	/* The test read behind the sink's back: its count is now wrong, and
	 * the next operation that relies on it says so. */
	ck_assert_int_eq(pipe_sink_empty(&s), -EIO);
	ck_assert(s.broken);
	ck_assert_int_eq(pipe_sink_put(&s, data, 1), -EIO);
	pipe_sink_close(&s);

	ck_assert_int_eq(pipe_sink_open(&s, 0), 0);
	ck_assert_int_eq(pipe_sink_set_prefix(&s, "abcd", 4), 0);
	ck_assert_int_eq(pipe_sink_put(&s, data, sizeof(data)), 0);
	ck_assert_int_eq(pipe_sink_empty(&s), 0);
	ck_assert_uint_eq(s.filled + s.prefix_len, 0);
	ck_assert_uint_eq(drain(&s, all, sizeof(all)), 0);
	ck_assert_int_eq(pipe_sink_set_prefix(&s, "again", 5), 0);
	pipe_sink_close(&s);
}
END_TEST

/* The sender's end stays blocking, as the io_uring reactor keeps its
 * sockets: with nothing there the splice returns at once. */
START_TEST(from_blocking_socket_never_blocks)
{
	struct pipe_sink s;
	int sv[2];
	uint8_t data[50000], all[60000];

	fill(data, sizeof(data), 3);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(pipe_sink_open(&s, 1 << 20), 0);
	ck_assert_int_eq(pipe_sink_set_prefix(&s, "P", 1), 0);
	ck_assert_int_eq(pipe_sink_from_socket(&s, sv[0], 4096), -EAGAIN);
	ck_assert_int_eq(write(sv[1], data, sizeof(data)), (ssize_t)sizeof(data));
	size_t got = 0;
	while (got < sizeof(data)) {
		ssize_t n = pipe_sink_from_socket(&s, sv[0], sizeof(data) - got);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
	}
	ck_assert_uint_eq(s.filled, sizeof(data));
	ck_assert_int_eq(pipe_sink_from_socket(&s, sv[0], 4096), -EAGAIN);
	ck_assert_uint_eq(drain(&s, all, sizeof(all)), 1 + sizeof(data));
	ck_assert_mem_eq(all + 1, data, sizeof(data));
	close(sv[0]);
	close(sv[1]);
	pipe_sink_close(&s);
}
END_TEST

/* A four-page pipe fills (the prefix takes a page of its own): -ENOSPC
 * after some payload went in, and that comes back whole. */
START_TEST(full_pipe_is_enospc)
{
	struct pipe_sink s;
	int sv[2];
	static uint8_t data[128 * 1024], back[128 * 1024];
	struct iovec iov = { back, sizeof(back) };
	ssize_t n;

	fill(data, sizeof(data), 4);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(pipe_sink_open(&s, 16384), 0);
	ck_assert_uint_eq(s.cap, 16384);
	ck_assert_int_eq(pipe_sink_set_prefix(&s, "HDR", 3), 0);
	ck_assert_int_eq(write(sv[1], data, 100000), 100000);
	size_t got = 0;
	while ((n = pipe_sink_from_socket(&s, sv[0], sizeof(data) - got)) > 0)
		got += (size_t)n;
	ck_assert_int_eq(n, -ENOSPC);
	ck_assert_uint_eq(s.filled, got);
	ck_assert_uint_gt(got, 0);
	ck_assert_uint_lt(got, 100000);
	ck_assert_int_eq(pipe_sink_unsplice(&s, &iov, 1), 0);
	ck_assert_mem_eq(back, data, got);
	/* The rest is still in the socket, in order. */
	ck_assert_int_eq(read(sv[0], back + got, 100000 - got), (ssize_t)(100000 - got));
	ck_assert_mem_eq(back, data, 100000);
	close(sv[0]);
	close(sv[1]);
	pipe_sink_close(&s);
}
END_TEST

/* Out to a non-blocking socket: prefix first, EAGAIN when it is full, the
 * rest after the reader made room, byte for byte. */
START_TEST(to_socket_full_then_rest)
{
	struct pipe_sink s;
	int sv[2], one = 4096;
	static uint8_t data[200000], got[200016];
	size_t left, rd = 0;
	ssize_t n;

	fill(data, sizeof(data), 5);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &one, sizeof(one));
	ck_assert_int_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	ck_assert_int_eq(pipe_sink_open(&s, 1 << 20), 0);
	ck_assert_int_eq(pipe_sink_set_prefix(&s, "0123456789abcdef", 16), 0);
	ck_assert_int_eq(pipe_sink_put(&s, data, sizeof(data)), 0);
	left = 16 + sizeof(data);
	bool saw_eagain = false;
	for (int rounds = 0; left && rounds < 100000; rounds++) {
		n = pipe_sink_to_socket(&s, sv[0], left, false);
		if (n == -EAGAIN) {
			saw_eagain = true;
			ssize_t r = read(sv[1], got + rd, sizeof(got) - rd);
			ck_assert_int_gt(r, 0);
			rd += (size_t)r;
			continue;
		}
		ck_assert_int_gt(n, 0);
		left -= (size_t)n;
		ck_assert_uint_eq(s.prefix_len + s.filled, left);
	}
	ck_assert_uint_eq(left, 0);
	ck_assert(saw_eagain);
	while (rd < sizeof(got) && (n = read(sv[1], got + rd, sizeof(got) - rd)) > 0)
		rd += (size_t)n;
	ck_assert_uint_eq(rd, sizeof(got));
	ck_assert_mem_eq(got, "0123456789abcdef", 16);
	ck_assert_mem_eq(got + 16, data, sizeof(data));
	ck_assert_uint_eq(s.nr_spliced, sizeof(data));
	close(sv[0]);
	close(sv[1]);
	pipe_sink_close(&s);
}
END_TEST

/* tee: dst gets its prefix followed by exactly src's payload, and src
 * still holds all of it (a retry on another path sends it again). */
START_TEST(tee_duplicates_behind_prefix)
{
	struct pipe_sink src, dst;
	static uint8_t data[100000], got[100100];

	fill(data, sizeof(data), 6);
	ck_assert_int_eq(pipe_sink_open(&src, 256 * 1024), 0);
	ck_assert_int_eq(pipe_sink_open(&dst, 512 * 1024), 0);
	ck_assert_int_eq(pipe_sink_put(&src, data, sizeof(data)), 0);
	ck_assert_int_eq(pipe_sink_set_prefix(&dst, "H2C-HEADER-24-BYTES-PAD!", 24), 0);
	ck_assert_int_eq(pipe_sink_tee(&dst, &src), 0);
	ck_assert_uint_eq(dst.filled, sizeof(data));
	ck_assert_uint_eq(dst.prefix_len, 24);
	ck_assert_uint_eq(src.filled, sizeof(data));
	ck_assert(!src.broken && !dst.broken);
	ck_assert_uint_eq(drain(&dst, got, sizeof(got)), 24 + sizeof(data));
	ck_assert_mem_eq(got, "H2C-HEADER-24-BYTES-PAD!", 24);
	ck_assert(memcmp(got + 24, data, sizeof(data)) == 0);
	ck_assert_uint_eq(drain(&src, got, sizeof(got)), sizeof(data));
	ck_assert(memcmp(got, data, sizeof(data)) == 0);
	pipe_sink_close(&src);
	pipe_sink_close(&dst);
}
END_TEST

/* A dst without room for all of src: -ENOSPC (whatever went in is counted
 * in dst, which emptying clears), src untouched. */
START_TEST(tee_too_small_is_enospc)
{
	struct pipe_sink src, dst;
	static uint8_t data[100000], got[100100];

	fill(data, sizeof(data), 7);
	ck_assert_int_eq(pipe_sink_open(&src, 256 * 1024), 0);
	ck_assert_int_eq(pipe_sink_open(&dst, 16384), 0);
	ck_assert_uint_eq(dst.cap, 16384);
	ck_assert_int_eq(pipe_sink_put(&src, data, sizeof(data)), 0);
	ck_assert_int_eq(pipe_sink_set_prefix(&dst, "HDR", 3), 0);
	ck_assert_int_eq(pipe_sink_tee(&dst, &src), -ENOSPC);
	ck_assert_uint_lt(dst.filled, sizeof(data));
	ck_assert(!dst.broken);
	ck_assert_uint_eq(drain(&dst, got, sizeof(got)), 3u + dst.filled);
	dst.filled = 0;
	dst.prefix_len = 0;
	/* A full dst: no room at all is the same answer. */
	ck_assert_int_eq(pipe_sink_put(&dst, data, 16384), 0);
	ck_assert_int_eq(pipe_sink_tee(&dst, &src), -ENOSPC);
	ck_assert_uint_eq(dst.filled, 16384);
	ck_assert_int_eq(pipe_sink_empty(&dst), 0);
	ck_assert_uint_eq(drain(&dst, got, sizeof(got)), 0);
	ck_assert_uint_eq(src.filled, sizeof(data));
	ck_assert_uint_eq(drain(&src, got, sizeof(got)), sizeof(data));
	ck_assert(memcmp(got, data, sizeof(data)) == 0);
	pipe_sink_close(&src);
	pipe_sink_close(&dst);
}
END_TEST

/* tee copies from the front of src: a prefix there would go out as
 * payload. */
START_TEST(tee_src_with_prefix_is_einval)
{
	struct pipe_sink src, dst;
	uint8_t data[5000], got[6000];

	fill(data, sizeof(data), 8);
	ck_assert_int_eq(pipe_sink_open(&src, 0), 0);
	ck_assert_int_eq(pipe_sink_open(&dst, 0), 0);
	ck_assert_int_eq(pipe_sink_set_prefix(&src, "PRE", 3), 0);
	ck_assert_int_eq(pipe_sink_put(&src, data, sizeof(data)), 0);
	ck_assert_int_eq(pipe_sink_tee(&dst, &src), -EINVAL);
	ck_assert_uint_eq(dst.filled, 0);
	ck_assert_uint_eq(drain(&dst, got, sizeof(got)), 0);
	/* A broken end is -EIO, before anything moves. */
	pipe_sink_close(&src);
	ck_assert_int_eq(pipe_sink_open(&src, 0), 0);
	ck_assert_int_eq(pipe_sink_put(&src, data, sizeof(data)), 0);
	src.broken = true;
	ck_assert_int_eq(pipe_sink_tee(&dst, &src), -EIO);
	ck_assert_uint_eq(drain(&dst, got, sizeof(got)), 0);
	pipe_sink_close(&src);
	pipe_sink_close(&dst);
}
END_TEST

/* Reset and empty drop a payload of many pages (spliced to /dev/null):
 * afterwards the pipe holds nothing (or the prefix alone) and takes a
 * full payload again, which it could not if pages were left behind. */
START_TEST(reset_and_empty_many_pages)
{
	struct pipe_sink s;
	static uint8_t data[200000], got[200100];
	struct iovec iov = { got, sizeof(got) };

	ck_assert_int_eq(pipe_sink_open(&s, 256 * 1024), 0);
	ck_assert_uint_ge(s.cap, 256 * 1024);
	for (int round = 0; round < 3; round++) {
		fill(data, sizeof(data), 9 + (unsigned)round);
		ck_assert_int_eq(pipe_sink_set_prefix(&s, "0123456789", 10), 0);
		ck_assert_int_eq(pipe_sink_put(&s, data, sizeof(data)), 0);
		ck_assert_int_eq(pipe_sink_reset(&s), 0);
		ck_assert_uint_eq(s.filled, 0);
		ck_assert_uint_eq(s.prefix_len, 10);
		/* Full size again behind the prefix, and it comes back. */
		ck_assert_int_eq(pipe_sink_put(&s, data, sizeof(data)), 0);
		ck_assert_int_eq(pipe_sink_unsplice(&s, &iov, 1), 0);
		ck_assert(memcmp(got, data, sizeof(data)) == 0);
		ck_assert_int_eq(pipe_sink_put(&s, data, sizeof(data)), 0);
		ck_assert_int_eq(pipe_sink_empty(&s), 0);
		ck_assert_uint_eq(s.filled + s.prefix_len, 0);
		ck_assert(!s.broken);
		ck_assert_uint_eq(drain(&s, got, sizeof(got)), 0);
	}
	pipe_sink_close(&s);
}
END_TEST

/* Every layer's pipes come out of one budget, an eighth of the descriptor
 * limit (two descriptors each): the NVMe/TCP queues' send pipes once sat
 * outside it, so that 4 paths x 16 queues took 128 descriptors more than
 * the NBD side's cap promised. */
START_TEST(counted_pipes_share_one_budget)
{
	struct rlimit rl = { 256, 256 };
	struct pipe_sink s[33];

	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	for (int i = 0; i < 32; i++)
		ck_assert_int_eq(pipe_sink_open_counted(&s[i], 65536), 0);
	ck_assert_int_eq(pipe_sink_open_counted(&s[32], 65536), -EMFILE);
	ck_assert(!pipe_sink_is_open(&s[32]));
	pipe_sink_close_counted(&s[32]); /* never opened: a no-op */
	pipe_sink_close_counted(&s[5]);
	pipe_sink_close_counted(&s[5]); /* twice: counted once */
	ck_assert_int_eq(pipe_sink_open_counted(&s[32], 65536), 0);
	ck_assert_int_eq(pipe_sink_open_counted(&s[5], 65536), -EMFILE);
	for (int i = 0; i < 33; i++)
		pipe_sink_close_counted(&s[i]);
	for (int i = 0; i < 32; i++)
		ck_assert_int_eq(pipe_sink_open_counted(&s[i], 65536), 0);
	for (int i = 0; i < 32; i++)
		pipe_sink_close_counted(&s[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pipe_sink");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, prefix_put_unsplice_keeps_prefix);
	tcase_add_test(tc, reset_and_empty);
	tcase_add_test(tc, from_blocking_socket_never_blocks);
	tcase_add_test(tc, full_pipe_is_enospc);
	tcase_add_test(tc, to_socket_full_then_rest);
	tcase_add_test(tc, tee_duplicates_behind_prefix);
	tcase_add_test(tc, tee_too_small_is_enospc);
	tcase_add_test(tc, tee_src_with_prefix_is_einval);
	tcase_add_test(tc, reset_and_empty_many_pages);
	tcase_add_test(tc, counted_pipes_share_one_budget);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
