/* libFuzzer harness for the configuration loader: the input is the text
 * of the file (libconfig syntax), loaded through config_load as
 * "nvmf-gateway check" and the daemon load it.  Checked:
 * - it either loads, or fails with at least one error line, and every
 *   line names the file: "FILE:LINE: message" with LINE within the text
 *   (or "FILE: not a text file ..." for a NUL byte);
 * - a file that loads, loaded twice, gives equal targets and exports and
 *   no key needing a restart (what a reload of an unchanged file sees);
 * - no crash, no leak (LeakSanitizer), whatever the text.
 * Inputs with @include are skipped: they name other files, which are not
 * the input (and /dev/stdin would block). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gateway/config.h"
#include "gateway/config_diff.h"
#include "gateway/base/log.h"

#include "tests/fuzz/fuzz_check.h"

/* libconfig before 1.7.3 leaks the text of a string token dropped while
 * recovering from a syntax error (hyperrealm/libconfig#142, fixed by #155);
 * Debian 12 ships 1.5.  That leak is the library's: the gateway's own
 * allocations are still checked. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libconfig.so\n";
}

static int fd = -1;
static char path[64];

static int load(struct gw_config **cfg, char **text, size_t *len)
{
	FILE *errs = open_memstream(text, len);
	check(errs);
	int rc = config_load(path, cfg, errs);
	fclose(errs);
	return rc;
}

/* Every line of errs names the file, and a line within the text. */
static void check_errors(const char *errs, size_t len, long lines)
{
	size_t plen = strlen(path);
	const char *p = errs, *end = errs + len;

	check(len > 0);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		check(nl);
		if (strncmp(p, path, plen) || p[plen] != ':') {
			fprintf(stderr, "error line without the file name: %.*s\n", (int)(nl - p), p);
			abort();
		}
		const char *q = p + plen + 1;
		if (!strncmp(q, " not a text file", 16)) {
			p = nl + 1;
			continue;
		}
		char *after;
		long line = strtol(q, &after, 10);
		if (after == q || *after != ':' || line < 1 || line > lines) {
			fprintf(stderr, "error line without a line in 1..%ld: %.*s\n", lines,
				(int)(nl - p), p);
			abort();
		}
		p = nl + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_config *a = NULL, *b = NULL;
	char *errs = NULL;
	size_t len = 0;

	if (fd < 0) {
		log_set_level(LOG_LVL_ERR);
		fd = memfd_create("fuzz_config", MFD_CLOEXEC);
		check(fd >= 0);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (memmem(data, size, "@include", 8))
		return 0;
	check(ftruncate(fd, 0) == 0);
	check(pwrite(fd, data, size, 0) == (ssize_t)size);
	long lines = 1;
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';

	int rc = load(&a, &errs, &len);
	if (rc < 0) {
		check(!a);
		check_errors(errs, len, lines);
		free(errs);
		return 0;
	}
	check(a);
	free(errs);
	check(load(&b, &errs, &len) == 0 && b);
	free(errs);
	check(a->nr_targets == b->nr_targets && a->nr_exports == b->nr_exports);
	for (size_t i = 0; i < a->nr_targets; i++)
		check(config_target_equal(&a->targets[i], &b->targets[i]));
	for (size_t i = 0; i < a->nr_exports; i++)
		check(config_export_equal(&a->exports[i], &b->exports[i]));
	char keys[256];
	check(!strcmp(config_diff_restart_keys(a, b, keys, sizeof(keys)), ""));
	FILE *f = open_memstream(&errs, &len);
	check(f);
	config_summary(a, f);
	fclose(f);
	check(len > 0);
	free(errs);
	config_free(a);
	config_free(b);
	return 0;
}
