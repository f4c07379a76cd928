/* nvmf-gateway: the command line. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "gateway/base/log.h"
#include "gateway/base/membudget.h"
#include "gateway/tools.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: nvmf-gateway COMMAND [OPTIONS]\n\n"
		"commands:\n"
		"  run [-c FILE] [-f] the daemon: connect the targets, serve the exports (NBD, FUSE)\n"
		"  check -c FILE      validate a configuration file (errors as FILE:LINE: message)\n"
		"  discover           read a target's discovery log page\n"
		"  bench              load-test a namespace over the gateway's own initiator\n"
		"  mount              serve a namespace as a file in a FUSE filesystem\n"
		"  nbd                export a namespace over NBD (socket or /dev/nbdN)\n"
		"  status             the running gateway: targets, paths, exports (-o json)\n"
		"  stats              the running gateway's counters and latency percentiles\n"
		"  reset TARGET       reset a target's controllers in the running gateway\n"
		"  reload             make the running gateway apply its file again\n"
		"  export-add NAME    start one export of the file in the running gateway\n"
		"  export-remove NAME stop one export in the running gateway\n\n"
		"  nvmf-gateway COMMAND --help shows its options; --version the version.\n");
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "run", cmd_run },
		{ "check", cmd_check },
		{ "discover", cmd_discover },
		{ "bench", cmd_bench },
		{ "mount", cmd_mount },
		{ "nbd", cmd_nbd },
		{ "status", cmd_control },
		{ "stats", cmd_control },
		{ "reset", cmd_control },
		{ "reload", cmd_control },
		{ "export-add", cmd_control },
		{ "export-remove", cmd_control },
	};

	/* A peer that goes away is an error of a send, never a signal: splice
	 * (nbd/splice.c) cannot ask for MSG_NOSIGNAL. */
	signal(SIGPIPE, SIG_IGN);
	/* Connections, paths and the NBD pipes (two descriptors each) need
	 * more than the usual soft limit of 1024; the hard limit is what the
	 * administrator (or systemd, 524288) allows. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (1u << 20) &&
	    rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max > (1u << 20) ? (1u << 20) : rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}

	log_init();
	membudget_pin_allocator();
	if (argc < 2) {
		usage(stderr);
		return 1;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("nvmf-gateway %s\n", NVMF_GATEWAY_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (unsigned i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "nvmf-gateway: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 1;
}
