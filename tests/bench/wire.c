/*
 * Loopback TCP with no protocol at all: references for the bench's
 * NBD-over-TCP point (tests/bench/run), measured here, not assumed.
 *
 *   wire raw STREAMS SECONDS    each stream a source that sends 1 MiB
 *                               buffers into a sink that receives them into
 *                               a 1 MiB buffer: the wire with a copy at each
 *                               end, as an NBD server that copies its
 *                               replies into the socket and its client make
 *   wire relay STREAMS SECONDS  the same with each stream passed through a
 *                               relay that splices it from one loopback TCP
 *                               socket to another (socket, pipe, socket: no
 *                               copy, no protocol): each byte crosses
 *                               loopback twice, as in the gateway's hop,
 *                               with nothing else done to it
 *   wire relay-copy ...         the same relay receiving into a buffer and
 *                               sending from it: on loopback, where the
 *                               sink copies out of the very pages a splice
 *                               passed on, as fast or faster (the spliced
 *                               relay ran 0.91-1.00x its MiB/s in seven runs)
 *
 * Prints one line in the bench's result format: MiB/s, then "-" for the
 * latency and context-switch columns, the relay threads' CPU microseconds
 * per MiB (their own clocks; "-" for raw), every CPU's busy time per MiB
 * and its share of the interval (/proc/stat: steal counts as busy, as in
 * the bench's other rows), all over the same interval: from the end of a
 * warm-up to the stop.  Blocking threads, one per role and stream: a plain
 * relay, not a tuned one, so its rate is what a relay reaches here at the
 * least, not a bound on every possible hop; what it shows is the cost of
 * the two crossings that every hop on this host pays.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TOOL_NAME "wire"
#include "tool.h"

#define CHUNK (1u << 20)
#define MAX_STREAMS 16
#define WARMUP_NS 500000000ull

static atomic_bool stopping;
static atomic_ullong received[MAX_STREAMS];

static int listener(struct sockaddr_in *a)
{
	socklen_t len = sizeof(*a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		die("socket");
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)a, sizeof(*a)) || listen(fd, MAX_STREAMS) ||
	    getsockname(fd, (struct sockaddr *)a, &len))
		die("listen on 127.0.0.1");
	return fd;
}

static int dial(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)a, sizeof(*a)))
		die("connect to 127.0.0.1");
	return fd;
}

static int take(int lfd)
{
	int fd = accept(lfd, NULL, NULL);

	if (fd < 0)
		die("accept");
	return fd;
}

static bool copy_relay;

static char *chunk_buffer(void)
{
	char *buf = malloc(CHUNK);

	if (!buf)
		die("malloc");
	return buf;
}

static void send_all(int fd, const char *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("send");
		off += (size_t)n;
	}
}

/* Up to CHUNK bytes into buf; 0 at the end of the stream. */
static size_t recv_some(int fd, char *buf)
{
	for (;;) {
		ssize_t n = recv(fd, buf, CHUNK, 0);

		if (n >= 0)
			return (size_t)n;
		if (errno != EINTR)
			die("recv");
	}
}

struct stream {
	int idx;
	int src, relay_in, relay_out, sink;
	clockid_t relay_clock;
	atomic_bool relay_clock_set;
};

static void *source(void *arg)
{
	struct stream *s = arg;
	char *buf = chunk_buffer();
	/* Random-ish bytes, as a memory volume holds: no page is shared. */
	for (size_t i = 0; i < CHUNK; i++)
		buf[i] = (char)(i * 2654435761u >> 13);
	while (!atomic_load(&stopping))
		send_all(s->src, buf, CHUNK);
	shutdown(s->src, SHUT_WR);
	free(buf);
	return NULL;
}

static void *relay(void *arg)
{
	struct stream *s = arg;
	int p[2];

	if (pthread_getcpuclockid(pthread_self(), &s->relay_clock))
		die("pthread_getcpuclockid");
	atomic_store(&s->relay_clock_set, true);
	if (copy_relay) {
		char *buf = chunk_buffer();
		for (size_t n; (n = recv_some(s->relay_in, buf));)
			send_all(s->relay_out, buf, n);
		shutdown(s->relay_out, SHUT_WR);
		free(buf);
		return NULL;
	}
	if (pipe(p))
		die("pipe");
	/* As large as this user may have (the gateway asks for 2 MiB). */
	if (fcntl(p[1], F_SETPIPE_SZ, 2 * CHUNK) < 0)
		fcntl(p[1], F_SETPIPE_SZ, CHUNK);
	for (;;) {
		ssize_t n = splice(s->relay_in, NULL, p[1], NULL, CHUNK, SPLICE_F_MOVE);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("splice from the socket");
		if (n == 0)
			break;
		while (n > 0) {
			ssize_t m = splice(p[0], NULL, s->relay_out, NULL, (size_t)n, SPLICE_F_MOVE);

			if (m < 0 && errno == EINTR)
				continue;
			if (m <= 0)
				die("splice to the socket");
			n -= m;
		}
	}
	shutdown(s->relay_out, SHUT_WR);
	close(p[0]);
	close(p[1]);
	return NULL;
}

static void *sink(void *arg)
{
	struct stream *s = arg;
	char *buf = chunk_buffer();
	for (size_t n; (n = recv_some(s->sink, buf));)
		atomic_fetch_add(&received[s->idx], (unsigned long long)n);
	free(buf);
	return NULL;
}


static unsigned long long sum_received(int n)
{
	unsigned long long s = 0;

	for (int i = 0; i < n; i++)
		s += atomic_load(&received[i]);
	return s;
}

static uint64_t relay_cpu_ns(struct stream *st, int n)
{
	uint64_t s = 0;

	for (int i = 0; i < n; i++)
		s += now_ns(st[i].relay_clock);
	return s;
}

int main(int argc, char **argv)
{
	static struct stream st[MAX_STREAMS];
	pthread_t th[3 * MAX_STREAMS];
	struct sockaddr_in front, back;
	int nth = 0, streams;
	bool relayed;
	double secs;

	if (argc != 4 || (strcmp(argv[1], "raw") && strcmp(argv[1], "relay") && strcmp(argv[1], "relay-copy")) ||
	    (streams = atoi(argv[2])) < 1 || streams > MAX_STREAMS || (secs = atof(argv[3])) <= 0) {
		fprintf(stderr, "usage: wire raw|relay|relay-copy STREAMS(1-%d) SECONDS\n", MAX_STREAMS);
		return 2;
	}
	relayed = strcmp(argv[1], "raw") != 0;
	copy_relay = !strcmp(argv[1], "relay-copy");
	int lback = listener(&back);
	int lfront = relayed ? listener(&front) : -1;

	/* Connected one stream at a time, so that each accept is its dial's. */
	for (int i = 0; i < streams; i++) {
		st[i].idx = i;
		st[i].src = dial(relayed ? &front : &back);
		if (relayed) {
			st[i].relay_in = take(lfront);
			st[i].relay_out = dial(&back);
		}
		st[i].sink = take(lback);
	}
	for (int i = 0; i < streams; i++) {
		if (pthread_create(&th[nth++], NULL, sink, &st[i]) ||
		    (relayed && pthread_create(&th[nth++], NULL, relay, &st[i])) ||
		    pthread_create(&th[nth++], NULL, source, &st[i]))
			die("pthread_create");
	}
	for (int i = 0; relayed && i < streams; i++)
		while (!atomic_load(&st[i].relay_clock_set))
			sched_yield();

	struct timespec warm = { 0, WARMUP_NS };
	nanosleep(&warm, NULL);
	unsigned long long b0, t0, b1, t1;
	host_busy(&b0, &t0);
	uint64_t c0 = relayed ? relay_cpu_ns(st, streams) : 0;
	unsigned long long r0 = sum_received(streams);
	uint64_t w0 = now_ns(CLOCK_MONOTONIC);

	struct timespec run = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };
	nanosleep(&run, NULL);
	unsigned long long r1 = sum_received(streams);
	uint64_t w1 = now_ns(CLOCK_MONOTONIC);
	uint64_t c1 = relayed ? relay_cpu_ns(st, streams) : 0;
	host_busy(&b1, &t1);
	atomic_store(&stopping, true);
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);

	double mib = (double)(r1 - r0) / 1048576.0;
	double hz = (double)sysconf(_SC_CLK_TCK);
	char cpu[32] = "-";

	if (mib <= 0) {
		fprintf(stderr, "wire: nothing arrived in %.1f s\n", secs);
		return 1;
	}
	if (relayed)
		snprintf(cpu, sizeof(cpu), "%.1f", (double)(c1 - c0) / 1000.0 / mib);
	printf("%.0f - - %s - - %.1f %.2f\n", mib / ((double)(w1 - w0) / 1e9), cpu,
	       (double)(b1 - b0) / hz * 1e6 / mib, t1 > t0 ? (double)(b1 - b0) / (double)(t1 - t0) : 0.0);
	return 0;
}
