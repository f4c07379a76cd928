#include "gateway/runtime_control.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECORD_NAME "control.path"

/* The first directory of $RUNTIME_DIRECTORY (systemd lists several with
 * ':' when the unit names several). */
static int record_file(char *buf, size_t len)
{
	const char *dir = getenv("RUNTIME_DIRECTORY");
	size_t n;

	if (!dir || dir[0] != '/')
		return -ENOENT;
	n = strcspn(dir, ":");
	if ((size_t)snprintf(buf, len, "%.*s/" RECORD_NAME, (int)n, dir) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int runtime_control_record(const char *path)
{
	char file[4096], tmp[4200];
	FILE *f;
	int ret;

	if ((ret = record_file(file, sizeof(file))) < 0)
		return ret == -ENOENT ? 0 : ret;
	snprintf(tmp, sizeof(tmp), "%s.%ld", file, (long)getpid());
	if (!(f = fopen(tmp, "we")))
		return -errno;
	fprintf(f, "%ld\n%s\n", (long)getpid(), path);
	if (fclose(f) != 0 || rename(tmp, file) < 0) {
		ret = -errno;
		unlink(tmp);
		return ret;
	}
	return 0;
}

const char *runtime_control_lookup(const char *from_file, char *buf, size_t len)
{
	const char *mainpid = getenv("MAINPID");
	char file[4096], line[32];
	long pid;
	FILE *f;

	if (!mainpid || !*mainpid || record_file(file, sizeof(file)) < 0 ||
	    !(f = fopen(file, "re")))
		return from_file;
	/* Only the record of the unit's own main process: one left by an
	 * earlier process is stale. */
	if (!fgets(line, sizeof(line), f) || (pid = strtol(line, NULL, 10)) <= 0 ||
	    pid != strtol(mainpid, NULL, 10) || !fgets(buf, (int)len, f)) {
		fclose(f);
		return from_file;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	if (!buf[0] || !strcmp(buf, from_file))
		return from_file;
	fprintf(stderr,
		"nvmf-gateway: notice: the file's gateway.control is %s, the running gateway "
		"(pid %ld) listens on %s until it restarts: asking it there\n",
		from_file, pid, buf);
	return buf;
}
