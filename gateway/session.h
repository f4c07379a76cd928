/* A one-controller session for the command-line tools (discover, bench):
 * options as nvme-cli names them, one reactor, connect, run a job while
 * the controller is live, shut it down properly (CC.SHN), exit code. */
#ifndef GW_SESSION_H
#define GW_SESSION_H

#include <getopt.h>
#include <stdbool.h>

#include "gateway/base/reactor.h"
#include "gateway/volume/volume.h"
#include "transports/ctrl.h"
#include "gateway/volume/mpath.h"

struct session;
typedef void (*session_job_fn)(struct session *s);

/* At most this many extra reactors (see extra below). */
#define SESSION_MAX_EXTRA 63

/* Reactors on threads of their own for a tool's I/O (nbd's connections,
 * bench's queues), ids 1..nr_started: started before session_run, which
 * stops and joins them once its own reactor has stopped (the target's
 * queues and timers live on them until then), and freed after it. */
struct session_extras {
	struct reactor r[SESSION_MAX_EXTRA];
	struct reactor *ptr[SESSION_MAX_EXTRA];
	struct session_stop_msg {
		struct reactor_msg m;
		struct reactor *r;
	} stop[SESSION_MAX_EXTRA];
	unsigned nr_started;
	bool joined;
};

struct session {
	struct reactor r;
	struct nvmf_ctrl ctrl;
	struct nvmf_ctrl_opts opts;
	const char *hostnqn, *hostid, *state_dir;
	uint32_t nsid;
	bool json;
	int rc; /* exit code */
	bool stopping;
	session_job_fn job;
	session_job_fn on_signal; /* SIGINT/SIGTERM during the job */
	int sfd;
	struct reactor_op sig_op;
	unsigned char siginfo[128];
	void *priv;
	/* Exporter commands (nbd, mount): the namespace as a volume, made
	 * before the job runs when want_volume is set.  With mem_size set
	 * there is no controller: a RAM volume of that size stands in (the
	 * test backend, --mem SIZE[:BLOCK]). */
	bool want_volume;
	bool read_only;
	uint64_t mem_size;
	uint32_t mem_block;
	struct volume *vol;
	/* With want_volume the controller is a one-path multipath target,
	 * so that the export survives the path's failures like the daemon's. */
	struct mp_target *mp;
	int reconnect_delay_s, ctrl_loss_tmo_s, fast_io_fail_tmo_s;
	/* Reactors of the caller's, already running, that submit I/O too
	 * (ids 1..nr_extra): the target gets a view and a queue on each, so
	 * their I/O never hops to reactor 0 and back. */
	struct reactor **extra;
	unsigned nr_extra;
	struct session_extras *extras; /* theirs, from session_extras_start */
	/* Without a volume: I/O queue i runs on reactor i % (1 + nr_extra). */
	struct reactor **io_reactors;
};

/* The connection options shared by every tool; see session_parse_opt.
 * -T (tos) and -w (host-traddr) are nvme-cli's letters, in
 * SESSION_PATH_SHORTOPTS because bench has -T (time) and -w (workload)
 * of its own and takes those two in their long form only. */
#define SESSION_SHORTOPTS "t:a:s:n:q:I:i:Q:k:c:l:gGo:f:S:C:"
#define SESSION_PATH_SHORTOPTS "T:w:"
#define SESSION_OPT_TOS 1006
#define SESSION_OPT_HOST_TRADDR 1007
#define SESSION_OPT_HOST_IFACE 1008
#define SESSION_OPT_SECRET_FILE 1101
#define SESSION_OPT_CTRL_SECRET_FILE 1102
#define SESSION_OPT_TLS 1103
#define SESSION_OPT_TLS_KEY_FILE 1104
#define SESSION_OPT_TLS_KDF 1105
#define SESSION_OPT_POLL_US 1106
#define SESSION_LONGOPTS                                                  \
	{ "transport", required_argument, 0, 't' },                        \
		{ "traddr", required_argument, 0, 'a' },                   \
		{ "trsvcid", required_argument, 0, 's' },                  \
		{ "nqn", required_argument, 0, 'n' },                      \
		{ "hostnqn", required_argument, 0, 'q' },                  \
		{ "hostid", required_argument, 0, 'I' },                   \
		{ "nr-io-queues", required_argument, 0, 'i' },             \
		{ "queue-size", required_argument, 0, 'Q' },               \
		{ "keep-alive-tmo", required_argument, 0, 'k' },           \
		{ "reconnect-delay", required_argument, 0, 'c' },          \
		{ "ctrl-loss-tmo", required_argument, 0, 'l' },            \
		{ "fast-io-fail-tmo", required_argument, 0, 1005 },        \
		{ "hdr-digest", no_argument, 0, 'g' },                     \
		{ "data-digest", no_argument, 0, 'G' },                    \
		{ "output-format", required_argument, 0, 'o' },            \
		{ "dhchap-secret", required_argument, 0, 'S' },            \
		{ "dhchap-ctrl-secret", required_argument, 0, 'C' },       \
		{ "dhchap-secret-file", required_argument, 0, SESSION_OPT_SECRET_FILE }, \
		{ "dhchap-ctrl-secret-file", required_argument, 0, SESSION_OPT_CTRL_SECRET_FILE }, \
		{ "tls", no_argument, 0, SESSION_OPT_TLS },                \
		{ "tls-key-file", required_argument, 0, SESSION_OPT_TLS_KEY_FILE }, \
		{ "tls-kdf", required_argument, 0, SESSION_OPT_TLS_KDF },   \
		{ "nsid", required_argument, 0, 1000 },                    \
		{ "state-dir", required_argument, 0, 1001 },               \
		{ "connect-timeout", required_argument, 0, 1002 },         \
		{ "io-timeout", required_argument, 0, 1003 },              \
		{ "max-xfer", required_argument, 0, 1004 },                \
		{ "tos", required_argument, 0, SESSION_OPT_TOS },          \
		{ "host-traddr", required_argument, 0, SESSION_OPT_HOST_TRADDR }, \
		{ "host-iface", required_argument, 0, SESSION_OPT_HOST_IFACE }, \
		{ "poll-us", required_argument, 0, SESSION_OPT_POLL_US },  \
		{ "verbose", no_argument, 0, 'v' }
#define SESSION_HELP                                                                   \
	"  -t, --transport tcp|rdma     transport (default tcp)\n"                       \
	"  -a, --traddr ADDR            target address (numeric IPv4/IPv6)\n"           \
	"  -s, --trsvcid PORT           target port\n"                                  \
	"  -n, --nqn NQN                subsystem NQN\n"                                \
	"  -q, --hostnqn NQN            host NQN (default /etc/nvme/hostnqn)\n"         \
	"  -I, --hostid UUID            host ID (default /etc/nvme/hostid)\n"           \
	"  -i, --nr-io-queues N         I/O queues (default 1)\n"                       \
	"  -Q, --queue-size N           entries per I/O queue (default 128)\n"          \
	"  -k, --keep-alive-tmo SEC     keep-alive timeout (default 5)\n"               \
	"  -c, --reconnect-delay SEC    nbd, mount: between reconnects (default 10)\n"  \
	"  -l, --ctrl-loss-tmo SEC      nbd, mount: give up after (default 600, -1 never)\n" \
	"      --fast-io-fail-tmo SEC   nbd, mount: fail I/O while reconnecting after (off)\n" \
	"  -g, --hdr-digest             NVMe/TCP header digest\n"                       \
	"  -G, --data-digest            NVMe/TCP data digest\n"                         \
	"  -S, --dhchap-secret KEY      DH-HMAC-CHAP host secret (DHHC-1:XX:...:)\n"    \
	"  -C, --dhchap-ctrl-secret KEY controller secret: authenticate the target too\n" \
	"                               (on the command line every local user sees a\n" \
	"                               key until it is scrubbed: prefer the next two\n" \
	"                               or $" "NVMF_GATEWAY_DHCHAP_SECRET, _CTRL_SECRET)\n" \
	"      --dhchap-secret-file FILE      the host secret from a private file\n"   \
	"      --dhchap-ctrl-secret-file FILE the controller secret likewise\n"         \
	"      --tls                    NVMe/TCP over TLS 1.3 with a configured PSK\n"  \
	"      --tls-key-file FILE      its key (NVMeTLSkey-1:01:...:), a private file\n" \
	"      --tls-kdf compat|rfc8446 TLS PSK derivation (default compat: nvme-cli 2.13)\n" \
	"  -o, --output-format normal|json\n"                                           \
	"      --nsid N                 namespace (default 1)\n"                        \
	"      --state-dir DIR          where a generated host NQN is kept\n"           \
	"      --connect-timeout MS     bound on connecting (default 10000)\n"          \
	"      --io-timeout MS          bound on each command (default 30000)\n"        \
	"      --max-xfer SIZE          cap on one command's data (default 256k)\n"         \
	"  -T, --tos N                  IP TOS (tcp) or RDMA traffic class byte 0-255\n"  \
	"                               (bench: --tos only)\n"                          \
	"  -w, --host-traddr ADDR       connect from this local address\n"              \
	"                               (bench: --host-traddr only)\n"                  \
	"  -f, --host-iface IF          connect through this interface\n"              \
	"      --poll-us N              busy-poll N us after each completion before\n"  \
	"                               sleeping (default 0: off); costs CPU\n"

/* --mem SIZE[:BLOCK] for the exporter commands: 0, or -1 after a message. */
int session_parse_mem(struct session *s, const char *arg);
#define SESSION_MEM_HELP \
	"      --mem SIZE[:BLOCK]       no target: serve a RAM volume (tests, benchmarks)\n"

void session_defaults(struct session *s, const char *default_port);
/* 1 if the option was one of the session's, 0 if not, -1 on a bad value. */
int session_parse_opt(struct session *s, int opt, const char *arg);
/* Starts n extra reactors (at most SESSION_MAX_EXTRA) for s; on failure
 * stops those it started and says which one failed.  -errno. */
int session_extras_start(struct session *s, struct session_extras *x, unsigned n,
			 const char *who);
/* Stops and joins them (once), then frees them: after session_run, on
 * every way out of it. */
void session_extras_free(struct session_extras *x);

/* Connects, runs job on the reactor once live, returns the exit code. */
int session_run(struct session *s, session_job_fn job);
/* From the job: shut down with exit code rc and leave session_run. */
void session_finish(struct session *s, int rc);

#endif
