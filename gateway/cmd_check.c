/* nvmf-gateway check: a configuration file's errors, or its summary. */
#include <getopt.h>
#include <stdio.h>

#include "gateway/config.h"
#include "gateway/tools.h"

int cmd_check(int argc, char **argv)
{
	static const struct option longopts[] = { { "config", required_argument, 0, 'c' },
						  { "help", no_argument, 0, 'h' },
						  { 0, 0, 0, 0 } };
	const char *path = NULL;
	struct gw_config *cfg;
	int opt;

	while ((opt = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			printf("usage: nvmf-gateway check -c FILE\n\nValidates FILE; prints every "
			       "error as FILE:LINE: message and exits 1, or a one-line summary.\n");
			return 0;
		}
		if (opt != 'c')
			return 1;
		path = optarg;
	}
	if (!path) {
		fprintf(stderr, "nvmf-gateway check: -c FILE is required\n");
		return 1;
	}
	if (config_load(path, &cfg, stderr) < 0)
		return 1;
	config_summary(cfg, stdout);
	config_free(cfg);
	return 0;
}
