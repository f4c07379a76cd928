/* nvmf-gateway status | stats | reset TARGET | reload | export-add NAME |
 * export-remove NAME: clients of the running daemon's control socket.
 * One request line out, one reply line back; -o json prints the reply as
 * it came, the default is a table. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "gateway/discovery_status.h"
#include "gateway/config.h"
#include "gateway/base/json.h"
#include "gateway/tools.h"
#include "gateway/runtime_control.h"

enum out_fmt { OUT_TABLE, OUT_JSON };

/* How long a client waits for the gateway's answer by default.  A reload
 * may wait behind the change being applied (it is queued), and a change
 * connects the targets it adds: minutes, not seconds.  A query is
 * answered by the main loop at once. */
#define CHANGE_TIMEOUT_S 300
#define QUERY_TIMEOUT_S 30

static void usage(FILE *f, const char *cmd)
{
	char def[108];

	config_default_control(def, sizeof(def));
	fprintf(f,
		"usage: nvmf-gateway status [-s SOCKET | -c FILE] [-o table|json] [-t SECONDS]\n"
		"       nvmf-gateway stats [-s SOCKET | -c FILE] [-o table|json] [-t SECONDS]\n"
		"       nvmf-gateway reset TARGET [-s SOCKET | -c FILE] [-o table|json] [-t SECONDS]\n"
		"       nvmf-gateway reload [-s SOCKET | -c FILE] [-o table|json] [-t SECONDS]\n"
		"       nvmf-gateway export-add NAME [-s SOCKET | -c FILE] [-o table|json] [-t SECONDS]\n"
		"       nvmf-gateway export-remove NAME [-s SOCKET | -c FILE] [-o table|json] [-t SECONDS]\n\n"
		"Asks the running gateway over its control socket (%s: %s).\n\n"
		"  status         targets, paths (controller and ANA state, reconnects), exports,\n"
		"                 discovery controllers and what they found\n"
		"  stats          per export and path counters, read/write latency percentiles\n"
		"  reset TARGET   reset every path's controller of TARGET (reconnect given-up paths)\n"
		"  reload         apply the configuration file again (as SIGHUP does)\n"
		"  export-add NAME     start export NAME as the configuration file has it now\n"
		"  export-remove NAME  stop export NAME (until the next reload or export-add)\n\n"
		"  -s, --socket SOCKET        the control socket (default %s)\n"
		"  -c, --config FILE          take the socket from FILE's gateway.control\n"
		"  -o, --output-format FMT    table (default; also \"normal\") or json\n"
		"  -t, --timeout SECONDS      give up when the gateway has not answered by then\n"
		"                             (default %d for reload, export-add and export-remove,\n"
		"                             %d for the others; 0 waits for ever)\n",
		cmd, cmd, def, CHANGE_TIMEOUT_S, QUERY_TIMEOUT_S);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for ev on fd until deadline_ms (mono_ms; < 0: none).  1 ready,
 * 0 the deadline passed, -1 poll failed (errno). */
static int wait_fd(int fd, short ev, int64_t deadline_ms)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = ev };
		int64_t left = deadline_ms < 0 ? -1 : deadline_ms - mono_ms();
		if (deadline_ms >= 0 && left <= 0)
			return 0;
		int r = poll(&p, 1, left < 0 || left > 60000 ? (left < 0 ? -1 : 60000) : (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r != 0)
			return r < 0 ? -1 : 1;
	}
}

static bool asking_change; /* the request changes something (for no_answer) */

static void no_answer(const char *path, unsigned timeout_s, const char *stage)
{
	fprintf(stderr,
		"nvmf-gateway: the gateway at %s did not %s within %u s (stopped or stuck?); "
		"giving up (-t sets the wait%s)\n",
		path, stage, timeout_s,
		asking_change && !strcmp(stage, "answer") ? "; the change may still be applied" : "");
}

/* Sends one line, returns the reply line (malloc'd, no newline) or NULL
 * with a message printed.  Everything, connecting included (a daemon that
 * does not accept fills its backlog), within timeout_s (0: no limit). */
static char *ask(const char *path, const char *req, unsigned timeout_s)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int64_t deadline = timeout_s ? mono_ms() + (int64_t)timeout_s * 1000 : -1;
	size_t len = 0, cap = 4096;
	char *buf = NULL;
	int fd, r;

	if (strlen(path) >= sizeof(a.sun_path)) {
		fprintf(stderr, "nvmf-gateway: socket path too long: %s\n", path);
		return NULL;
	}
	memcpy(a.sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		fprintf(stderr, "nvmf-gateway: socket: %s\n", strerror(errno));
		return NULL;
	}
	/* A full backlog makes a non-blocking AF_UNIX connect fail with
	 * EAGAIN (it does not go in progress): try again until the deadline. */
	while (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EINPROGRESS) {
			int soerr = 0;
			socklen_t sl = sizeof(soerr);
			r = wait_fd(fd, POLLOUT, deadline);
			if (r == 0) {
				no_answer(path, timeout_s, "accept the connection");
				goto fail;
			}
			if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
				soerr = errno;
			if (!soerr)
				break;
			errno = soerr;
		}
		if (errno != EAGAIN) {
			fprintf(stderr, "nvmf-gateway: cannot reach the gateway at %s: %s\n", path,
				strerror(errno));
			goto fail;
		}
		if (deadline >= 0 && mono_ms() >= deadline) {
			no_answer(path, timeout_s, "accept the connection");
			goto fail;
		}
		poll(NULL, 0, 50);
	}
	for (size_t off = 0, n = strlen(req); off < n;) {
		ssize_t w = send(fd, req + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && (errno == EINTR || errno == EAGAIN)) {
			r = errno == EAGAIN ? wait_fd(fd, POLLOUT, deadline) : 1;
			if (r == 0) {
				no_answer(path, timeout_s, "take the request");
				goto fail;
			}
			if (r > 0)
				continue;
			fprintf(stderr, "nvmf-gateway: %s: poll: %s\n", path, strerror(errno));
			goto fail;
		}
		if (w < 0) {
			fprintf(stderr, "nvmf-gateway: %s: send: %s\n", path, strerror(errno));
			goto fail;
		}
		off += (size_t)w;
	}
	for (;;) {
		if (!buf || len + 1 >= cap) {
			char *nb = realloc(buf, cap *= 2);
			if (!nb) {
				fprintf(stderr, "nvmf-gateway: out of memory\n");
				goto fail;
			}
			buf = nb;
		}
		r = wait_fd(fd, POLLIN, deadline);
		if (r == 0) {
			no_answer(path, timeout_s, "answer");
			goto fail;
		}
		ssize_t got = r < 0 ? -1 : recv(fd, buf + len, cap - len - 1, 0);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0) {
			fprintf(stderr, "nvmf-gateway: %s: %s before a reply\n", path,
				got < 0 ? strerror(errno) : "the gateway closed the connection");
			goto fail;
		}
		len += (size_t)got;
		buf[len] = 0;
		char *nl = memchr(buf, '\n', len);
		if (nl) {
			*nl = 0;
			close(fd);
			return buf;
		}
	}
fail:
	free(buf);
	close(fd);
	return NULL;
}

static const char *txt(const struct json_val *v, const char *key)
{
	return json_get_text(v, key, "-");
}

static void human_bytes(const char *s, char *buf, size_t len)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = strtod(s, NULL);
	unsigned u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%s", s);
	else
		snprintf(buf, len, "%.1f%s", v, units[u]);
}

static void print_paths_header(bool stats)
{
	if (stats)
		printf("%-16s %-4s %-9s %-22s %-12s %10s %10s %10s %10s %7s %7s %9s\n", "TARGET",
		       "PATH", "TRANSPORT", "ADDRESS", "STATE", "READS", "WRITES", "READ", "WRITTEN",
		       "ERRORS", "RETRIES", "IN-FLIGHT");
	else
		printf("%-16s %-13s %-4s %-9s %-22s %-12s %-15s %6s %10s %9s %7s %6s\n", "TARGET",
		       "TARGET-STATE", "PATH", "TRANSPORT", "ADDRESS", "STATE", "ANA", "CNTLID",
		       "RECONNECTS", "IN-FLIGHT", "RETRIES", "ERRORS");
}

static void print_targets(const struct json_val *root, bool stats)
{
	const struct json_val *tg = json_get(root, "targets");

	print_paths_header(stats);
	for (size_t i = 0; tg && tg->type == JSON_ARR && i < tg->nr_kids; i++) {
		const struct json_val *t = &tg->kids[i];
		const struct json_val *ps = json_get(t, "paths");
		size_t np = ps && ps->type == JSON_ARR ? ps->nr_kids : 0;
		if (!np)
			printf("%-16s %-13s\n", txt(t, "name"), txt(t, "state"));
		for (size_t k = 0; k < np; k++) {
			const struct json_val *p = &ps->kids[k];
			char addr[96];
			snprintf(addr, sizeof(addr), "%s:%s", txt(p, "traddr"), txt(p, "trsvcid"));
			if (stats) {
				char rb[32], wb[32];
				human_bytes(txt(p, "read_bytes"), rb, sizeof(rb));
				human_bytes(txt(p, "write_bytes"), wb, sizeof(wb));
				printf("%-16s %-4s %-9s %-22s %-12s %10s %10s %10s %10s %7s %7s %9s\n",
				       k ? "" : txt(t, "name"), txt(p, "index"),
				       txt(p, "transport"), addr, txt(p, "state"), txt(p, "reads"),
				       txt(p, "writes"), rb, wb, txt(p, "errors"), txt(p, "retries"),
				       txt(p, "in_flight"));
			} else {
				printf("%-16s %-13s %-4s %-9s %-22s %-12s %-15s %6s %10s %9s %7s %6s\n",
				       k ? "" : txt(t, "name"), k ? "" : txt(t, "state"),
				       txt(p, "index"), txt(p, "transport"), addr, txt(p, "state"),
				       txt(p, "ana_state"), txt(p, "cntlid"), txt(p, "reconnects"),
				       txt(p, "in_flight"), txt(p, "retries"), txt(p, "errors"));
			}
		}
	}
}

/* Targets not reached yet: why, and when the next attempt is. */
static void print_waiting(const struct json_val *root)
{
	const struct json_val *tg = json_get(root, "targets");

	for (size_t i = 0; tg && tg->type == JSON_ARR && i < tg->nr_kids; i++) {
		const struct json_val *t = &tg->kids[i];
		const struct json_val *in = json_get(t, "next_attempt_in_s");
		if (!json_get(t, "last_error"))
			continue;
		printf("target %s: waiting for target for %s s, last error: %s, next attempt: %s",
		       txt(t, "name"), txt(t, "waiting_s"), txt(t, "last_error"),
		       txt(t, "next_attempt"));
		if (in)
			printf(" (in %s s)", txt(t, "next_attempt_in_s"));
		printf("\n");
	}
}

static void print_status(const struct json_val *root)
{
	const struct json_val *ex = json_get(root, "exports");

	printf("nvmf-gateway %s: %s, up %s s, %s of %s exports running, %s reloads (%s)\n",
	       txt(root, "version"), txt(root, "state"), txt(root, "uptime_s"),
	       txt(root, "exports_running"), txt(root, "exports_total"), txt(root, "reloads"),
	       txt(root, "config"));
	/* Why matters as much as which: epoll on a host that has io_uring
	 * means a sysctl, a seccomp profile or a forced setting. */
	printf("reactor backend: %s (%s)\n", txt(root, "reactor_backend"),
	       txt(root, "reactor_backend_why"));
	const struct json_val *bp = json_get(root, "busy_poll");
	if (strcmp(txt(root, "poll_us"), "0") && bp)
		printf("busy poll: %s us after each completion; %s spins ended with one, %s slept, "
		       "%s ms spent spinning\n",
		       txt(root, "poll_us"), txt(bp, "hits"), txt(bp, "misses"), txt(bp, "spin_ms"));
	printf("\n");
	print_targets(root, false);
	print_waiting(root);
	discovery_print_status(root);
	printf("\n%-20s %-8s %-16s %5s %-9s %10s %10s %10s %7s %9s  %-14s %s\n", "EXPORT",
	       "KIND", "TARGET", "NSID", "STATE", "SIZE", "READS", "WRITES", "ERRORS", "IN-FLIGHT",
	       "ORIGIN", "WHERE");
	for (size_t i = 0; ex && ex->type == JSON_ARR && i < ex->nr_kids; i++) {
		const struct json_val *e = &ex->kids[i];
		char size[32], where[256] = "";
		const char *l = json_get_str(e, "nbd_listen"), *d = json_get_str(e, "nbd_device");
		const char *ni = json_get_str(e, "nbd_interface");
		const struct json_val *f = json_get(e, "fuse_file");
		char dev[64];
		human_bytes(txt(e, "size"), size, sizeof(size));
		/* "/dev/nbd0 (ioctl)": what the device can do depends on it. */
		if (d && ni) {
			snprintf(dev, sizeof(dev), "%s (%s)", d, ni);
			d = dev;
		}
		snprintf(where, sizeof(where), "%s%s%s%s%s", d ? d : "", d && l ? " " : "",
			 l ? l : "", (d || l) && f && f->b ? " " : "", f && f->b ? "fuse" : "");
		printf("%-20s %-8s %-16s %5s %-9s %10s %10s %10s %7s %9s  %-14s %s\n",
		       txt(e, "name"), txt(e, "kind"), txt(e, "target"), txt(e, "nsid"),
		       txt(e, "state"), size, txt(e, "reads"), txt(e, "writes"), txt(e, "errors"),
		       txt(e, "in_flight"), txt(e, "origin"), where);
	}
}

static void print_stats(const struct json_val *root)
{
	const struct json_val *ex = json_get(root, "exports");

	printf("%-20s %-9s %10s %10s %10s %10s %7s %7s %9s  %-30s %-30s\n", "EXPORT", "STATE",
	       "READS", "WRITES", "READ", "WRITTEN", "ERRORS", "RETRIES", "IN-FLIGHT",
	       "READ us p50/p95/p99/p99.9", "WRITE us p50/p95/p99/p99.9");
	for (size_t i = 0; ex && ex->type == JSON_ARR && i < ex->nr_kids; i++) {
		const struct json_val *e = &ex->kids[i];
		const struct json_val *rl = json_get(e, "read_latency_us");
		const struct json_val *wl = json_get(e, "write_latency_us");
		char rb[32], wb[32], r[64], w[64];
		human_bytes(txt(e, "read_bytes"), rb, sizeof(rb));
		human_bytes(txt(e, "write_bytes"), wb, sizeof(wb));
		snprintf(r, sizeof(r), "%s/%s/%s/%s", txt(rl, "p50"), txt(rl, "p95"), txt(rl, "p99"),
			 txt(rl, "p99.9"));
		snprintf(w, sizeof(w), "%s/%s/%s/%s", txt(wl, "p50"), txt(wl, "p95"), txt(wl, "p99"),
			 txt(wl, "p99.9"));
		printf("%-20s %-9s %10s %10s %10s %10s %7s %7s %9s  %-30s %-30s\n", txt(e, "name"),
		       txt(e, "state"), txt(e, "reads"), txt(e, "writes"), rb, wb, txt(e, "errors"),
		       txt(e, "retries"), txt(e, "in_flight"), r, w);
	}
	printf("\n");
	print_targets(root, true);
}

static void print_change(const char *cmd, const struct json_val *root)
{
	if (!strcmp(cmd, "reload")) {
		printf("reloaded: %s added, %s removed, %s changed, %s kept, %s re-attached; "
		       "%s of %s exports running\n",
		       txt(root, "added"), txt(root, "removed"), txt(root, "changed"),
		       txt(root, "kept"), txt(root, "reattached"), txt(root, "exports_running"),
		       txt(root, "exports_total"));
		if (json_get_str(root, "restart_needed"))
			printf("changed keys that take a restart: %s\n",
			       json_get_str(root, "restart_needed"));
		return;
	}
	printf("ok\n");
}

int cmd_control(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, 0, 's' },
		{ "config", required_argument, 0, 'c' },
		{ "output-format", required_argument, 0, 'o' },
		{ "timeout", required_argument, 0, 't' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *cmd = argv[0], *sock = NULL, *conf = NULL, *arg = NULL;
	enum out_fmt fmt = OUT_TABLE;
	char def[108], recorded[4096];
	struct gw_config *cfg = NULL;
	bool needs_arg = !strcmp(cmd, "reset") || !strncmp(cmd, "export-", 7);
	bool change = !strcmp(cmd, "reload") || !strncmp(cmd, "export-", 7);
	unsigned timeout_s = change ? CHANGE_TIMEOUT_S : QUERY_TIMEOUT_S;
	asking_change = change;
	int opt, rc = 1;

	while ((opt = getopt_long(argc, argv, "s:c:o:t:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 't': {
			char *end;
			unsigned long v;
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' || v > 86400) {
				fprintf(stderr, "nvmf-gateway %s: -t takes whole seconds, 0 to 86400 "
					"(0: no limit)\n", cmd);
				return 1;
			}
			timeout_s = (unsigned)v;
			break;
		}
		case 's': sock = optarg; break;
		case 'c': conf = optarg; break;
		case 'o':
			if (!strcmp(optarg, "json"))
				fmt = OUT_JSON;
			else if (!strcmp(optarg, "table") || !strcmp(optarg, "normal"))
				fmt = OUT_TABLE;
			else {
				fprintf(stderr, "nvmf-gateway %s: -o takes table or json\n", cmd);
				return 1;
			}
			break;
		case 'h': usage(stdout, cmd); return 0;
		default: usage(stderr, cmd); return 1;
		}
	}
	if (needs_arg && optind < argc)
		arg = argv[optind++];
	if (optind < argc || (needs_arg && !arg)) {
		usage(stderr, cmd);
		return 1;
	}
	if (sock && conf) {
		fprintf(stderr, "nvmf-gateway %s: -s and -c exclude each other\n", cmd);
		return 1;
	}
	if (conf) {
		if (config_load(conf, &cfg, stderr) < 0)
			return 1;
		sock = runtime_control_lookup(cfg->control, recorded, sizeof(recorded));
	} else if (!sock) {
		config_default_control(def, sizeof(def));
		sock = def;
	}

	struct json_buf j;
	json_buf_init(&j);
	json_obj_begin(&j);
	if (!strcmp(cmd, "reset")) {
		json_kv_str(&j, "cmd", "controller-reset");
		json_kv_str(&j, "target", arg);
	} else {
		json_kv_str(&j, "cmd", cmd);
		if (arg)
			json_kv_str(&j, "name", arg);
	}
	json_obj_end(&j);
	size_t n = j.len;
	char *req = malloc(n + 2);
	if (!req || !json_buf_ok(&j)) {
		fprintf(stderr, "nvmf-gateway: out of memory\n");
		goto out;
	}
	memcpy(req, j.p, n);
	req[n] = '\n';
	req[n + 1] = 0;
	char *reply = ask(sock, req, timeout_s);
	free(req);
	if (!reply)
		goto out;

	struct json_val *root = NULL;
	char err[128];
	if (json_parse(reply, strlen(reply), &root, err, sizeof(err)) < 0 ||
	    root->type != JSON_OBJ) {
		fprintf(stderr, "nvmf-gateway: the gateway's reply is not a JSON object (%s): %s\n",
			root ? "not an object" : err, reply);
		json_val_free(root);
		free(reply);
		goto out;
	}
	const char *error = json_get_str(root, "error");
	if (fmt == OUT_JSON)
		printf("%s\n", reply);
	else if (error)
		fprintf(stderr, "nvmf-gateway %s: %s\n", cmd, error);
	else if (!strcmp(cmd, "status"))
		print_status(root);
	else if (!strcmp(cmd, "stats"))
		print_stats(root);
	else
		print_change(cmd, root);
	rc = error ? 1 : 0;
	json_val_free(root);
	free(reply);
out:
	json_buf_free(&j);
	config_free(cfg);
	return rc;
}
