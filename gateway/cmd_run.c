/* nvmf-gateway run: the daemon's command line (the daemon is daemon.c). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "gateway/config.h"
#include "gateway/base/log.h"
#include "gateway/daemon.h"
#include "gateway/tools.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: nvmf-gateway run [-c FILE] [-f|--foreground]\n\n"
		   "Runs the gateway: connects every target of FILE (default %s) and\n"
		   "serves its exports until SIGINT or SIGTERM.\n\n"
		   "  -c, --config FILE     configuration file\n"
		   "  -f, --foreground      do not daemonize (for systemd and tests)\n"
		   "  -v, --verbose         debug logs\n",
		GW_CONFIG_DEFAULT_PATH);
}

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, 0, 'c' }, { "foreground", no_argument, 0, 'f' },
		{ "verbose", no_argument, 0, 'v' },	 { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *path = GW_CONFIG_DEFAULT_PATH;
	bool foreground = false;
	int opt;

	while ((opt = getopt_long(argc, argv, "c:fvh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 'f': foreground = true; break;
		case 'v': log_set_level(LOG_LVL_DEBUG); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 1;
	}
	return daemon_run(path, foreground);
}
