/*
 * What a bare relay that sleeps adds to a QD1 round trip on this host,
 * measured here, not assumed: a reference for the bench's QD1 goal without
 * the busy-poll window (tests/bench/run), as wire.c is for NBD over TCP.
 * A reference, not a bound: a relay that spins does better (the gateway's
 * --poll-us), and where the scheduler puts three processes on two CPUs
 * moves it (pinned all to one CPU here: 25 us direct, 66 through the
 * relay; unpinned 33 and 72).
 *
 *   pingpong direct SECONDS   a client process sends a 28-byte request (an
 *                             NBD read's) over a Unix socket to a server
 *                             process that answers with 16 + 4096 bytes (its
 *                             reply), one at a time: an NBD server that does
 *                             no work, nbdkit's place in the bench
 *   pingpong relay SECONDS    the same client and a relay process in the
 *                             server's place, which passes each request on
 *                             as a 72-byte command over loopback TCP to a
 *                             third process, reads back its 24 + 4096-byte
 *                             answer (a C2HData PDU with the data) and
 *                             answers the client: the gateway's place, with
 *                             nothing to do but forward
 *
 * Every process sleeps in a blocking receive between messages, as the
 * gateway does with its busy-poll window off (it makes fewer system calls:
 * one io_uring_enter both submits and waits).  Each message wakes a
 * process that sleeps, so the relay's round trip costs two more wakeups
 * and a loopback TCP round trip than the direct one; on a virtual machine
 * a wakeup of an idle CPU is most of a QD1 round trip.
 *
 * Prints one line in the bench's result format: round trips per second,
 * mean and p99 latency in microseconds (the client's CLOCK_MONOTONIC, from
 * before the request's send to the end of the reply: a whole round trip,
 * where fio's completion latency starts after the submission), "-"
 * for the server CPU columns, and every CPU's busy time per round trip
 * with its share of the interval (/proc/stat), from the end of a warm-up
 * to the stop.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOOL_NAME "pingpong"
#include "tool.h"

#define REQ_LEN 28u		 /* struct nbd_request */
#define REPLY_LEN (16u + 4096u)	 /* simple reply + 4 KiB */
#define CMD_LEN 72u		 /* NVMe/TCP command capsule */
#define ANSWER_LEN (24u + 4096u) /* C2HData header + 4 KiB */
#define WARMUP_NS 500000000ull
#define MAX_SAMPLES (1u << 22)

static void send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("send");
		buf += n;
		len -= (size_t)n;
	}
}

/* false at the end of the stream (the peer is done) */
static bool recv_all(int fd, char *buf, size_t len)
{
	while (len) {
		ssize_t n = recv(fd, buf, len, MSG_WAITALL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("recv");
		if (n == 0)
			return false;
		buf += n;
		len -= (size_t)n;
	}
	return true;
}

/* Answers each request of in_len bytes with out_len bytes until the end. */
static void serve(int fd, size_t in_len, size_t out_len)
{
	static char in[4096], out[8192];

	memset(out, 0x5a, sizeof(out));
	while (recv_all(fd, in, in_len))
		send_all(fd, out, out_len);
	exit(0);
}

static void relay(int front, int back)
{
	static char req[REQ_LEN], cmd[CMD_LEN], answer[ANSWER_LEN], reply[REPLY_LEN];

	while (recv_all(front, req, sizeof(req))) {
		memcpy(cmd, req, sizeof(req));
		send_all(back, cmd, sizeof(cmd));
		if (!recv_all(back, answer, sizeof(answer)))
			die("the server closed");
		memcpy(reply + 16, answer + 24, 4096);
		send_all(front, reply, sizeof(reply));
	}
	exit(0);
}

static void nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		die("TCP_NODELAY");
}

/* A loopback TCP connection: *a and *b its two ends. */
static void tcp_pair(int *a, int *b)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&sa, &len))
		die("listen on 127.0.0.1");
	*a = socket(AF_INET, SOCK_STREAM, 0);
	if (*a < 0 || connect(*a, (struct sockaddr *)&sa, sizeof(sa)))
		die("connect to 127.0.0.1");
	*b = accept(l, NULL, NULL);
	if (*b < 0)
		die("accept");
	close(l);
	nodelay(*a);
	nodelay(*b);
}

static pid_t child(void)
{
	pid_t p = fork();

	if (p < 0)
		die("fork");
	return p;
}


static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static char req[REQ_LEN], reply[REPLY_LEN];
	int front[2];
	bool relayed;
	double secs;
	pid_t kids[2];
	int nkids = 0;

	if (argc != 3 || (strcmp(argv[1], "direct") && strcmp(argv[1], "relay")) ||
	    (secs = atof(argv[2])) <= 0) {
		fprintf(stderr, "usage: pingpong direct|relay SECONDS\n");
		return 2;
	}
	relayed = !strcmp(argv[1], "relay");
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, front))
		die("socketpair");
	if (!relayed) {
		if ((kids[nkids++] = child()) == 0) {
			close(front[0]);
			serve(front[1], REQ_LEN, REPLY_LEN);
		}
	} else {
		int a, b;

		tcp_pair(&a, &b);
		if ((kids[nkids++] = child()) == 0) {
			close(front[0]);
			close(front[1]);
			close(a);
			serve(b, CMD_LEN, ANSWER_LEN);
		}
		if ((kids[nkids++] = child()) == 0) {
			close(front[0]);
			close(b);
			relay(front[1], a);
		}
		close(a);
		close(b);
	}
	close(front[1]);

	uint32_t *lat = malloc(MAX_SAMPLES * sizeof(*lat));
	unsigned long long b0 = 0, t0 = 0, b1, t1;
	uint64_t start = now_ns(CLOCK_MONOTONIC), end = 0, w0 = 0, sum = 0;
	size_t n = 0;	       /* latencies kept */
	uint64_t trips = 0;    /* round trips measured: the rate's */
	bool measuring = false;

	if (!lat)
		die("malloc");
	for (;;) {
		uint64_t s = now_ns(CLOCK_MONOTONIC);

		if (!measuring && s - start >= WARMUP_NS) {
			measuring = true;
			host_busy(&b0, &t0);
			w0 = s;
			end = s + (uint64_t)(secs * 1e9);
		}
		if (measuring && s >= end)
			break;
		send_all(front[0], req, sizeof(req));
		if (!recv_all(front[0], reply, sizeof(reply)))
			die("the server closed");
		uint64_t d = now_ns(CLOCK_MONOTONIC) - s;

		if (measuring) {
			trips++;
			sum += d;
			if (n < MAX_SAMPLES)
				lat[n++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
		}
	}
	uint64_t w1 = now_ns(CLOCK_MONOTONIC);

	host_busy(&b1, &t1);
	close(front[0]); /* the server, or the relay and then its server, end */
	for (int i = 0; i < nkids; i++)
		waitpid(kids[i], NULL, 0);
	if (!n) {
		fprintf(stderr, "pingpong: no round trip in %.1f s\n", secs);
		return 1;
	}
	qsort(lat, n, sizeof(*lat), cmp_u32);
	double hz = (double)sysconf(_SC_CLK_TCK);

	/* p99: the smallest latency with 99% of the samples at or below it */
	printf("%.0f %.1f %.1f - - - %.1f %.2f\n", (double)trips / ((double)(w1 - w0) / 1e9),
	       (double)sum / (double)trips / 1000.0, lat[(n * 99 + 99) / 100 - 1] / 1000.0,
	       (double)(b1 - b0) / hz * 1e6 / (double)trips,
	       t1 > t0 ? (double)(b1 - b0) / (double)(t1 - t0) : 0.0);
	free(lat);
	return 0;
}
