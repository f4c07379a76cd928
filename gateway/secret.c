#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "gateway/secret.h"

const char *gw_secret_file_problem(const struct stat *st, char *buf, size_t len)
{
	uid_t self = geteuid();

	if (st->st_mode & (S_IRWXG | S_IRWXO)) {
		snprintf(buf, len, "is readable by group or others (mode %04o)",
			 (unsigned)(st->st_mode & 07777));
		return buf;
	}
	if (st->st_uid != 0 && st->st_uid != self) {
		snprintf(buf, len, "is owned by uid %u, neither root nor the gateway's uid %u",
			 (unsigned)st->st_uid, (unsigned)self);
		return buf;
	}
	return NULL;
}

static int read_secret(const char *file, bool regular, char *buf, size_t len, char *why,
		       size_t wlen)
{
	struct stat st;
	char problem[128];
	ssize_t n;
	/* O_NONBLOCK: opening a FIFO with no writer returns at once (to be
	 * refused below) instead of blocking the thread. */
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | (regular ? O_NONBLOCK : 0));

	if (fd < 0 || fstat(fd, &st) < 0) {
		int ret = -errno;
		snprintf(why, wlen, "cannot open %s: %s", file, strerror(errno));
		if (fd >= 0)
			close(fd);
		return ret;
	}
	if (regular && !S_ISREG(st.st_mode)) {
		snprintf(why, wlen, "%s is not a regular file; refusing it", file);
		close(fd);
		return -EINVAL;
	}
	if (gw_secret_file_problem(&st, problem, sizeof(problem))) {
		snprintf(why, wlen, "%s holds a secret and %s; refusing it", file, problem);
		close(fd);
		return -EPERM;
	}
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0) {
		snprintf(why, wlen, "cannot read %s: %s", file, strerror(errno));
		return -EIO;
	}
	buf[n] = 0;
	/* One line, as nvme gen-dhchap-key > FILE writes it. */
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = 0;
	n = (ssize_t)strlen(buf);
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		buf[--n] = 0;
	return 0;
}

int gw_secret_read_file(const char *file, char *buf, size_t len, char *why, size_t wlen)
{
	return read_secret(file, false, buf, len, why, wlen);
}

int gw_secret_read_conf_file(const char *file, char *buf, size_t len, char *why, size_t wlen)
{
	return read_secret(file, true, buf, len, why, wlen);
}

bool gw_secret_from_env(const char *name, char *buf, size_t len)
{
	char *v = getenv(name);

	if (!v)
		return false;
	snprintf(buf, len, "%s", v);
	memset(v, 0, strlen(v));
	unsetenv(name);
	return true;
}

void gw_secret_scrub_arg(char *arg, const char *opt)
{
	/* Same length, so the other arguments stay where ps expects them. */
	memset(arg, 'x', strlen(arg));
	log_warn("the secret given with %s was readable by every local user in "
		 "/proc/%d/cmdline (ps) until now, and is overwritten there; give it with "
		 "--%s-file FILE or in %s instead",
		 opt, (int)getpid(),
		 strstr(opt, "ctrl") ? "dhchap-ctrl-secret" : "dhchap-secret",
		 strstr(opt, "ctrl") ? GW_SECRET_CTRL_ENV : GW_SECRET_ENV);
}
