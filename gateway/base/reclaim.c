#include "gateway/base/reclaim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "gateway/base/reactor.h"

static bool done;

/* One message per reactor, sent once: static, because a reactor may run
 * its message after we return and must not free or leak it.  Reactors
 * beyond the array get the flag when they start (none today: the config
 * allows 256). */
#define RECLAIM_MAX_MSGS 256
struct flusher_msg {
	struct reactor_msg m;
	unsigned id;
};
static struct flusher_msg flusher_msgs[RECLAIM_MAX_MSGS];

static void flusher_on_thread(struct reactor_msg *m)
{
	struct flusher_msg *f = container_of(m, struct flusher_msg, m);
	int ret = reactor_thread_io_flusher();

	if (ret < 0)
		log_debug("reclaim: reactor %u: PR_SET_IO_FLUSHER: %s", f->id, strerror(-ret));
}

static const char *err_name(int err, char *buf, size_t len)
{
	const char *n = strerrorname_np(err);

	if (n)
		return n;
	snprintf(buf, len, "errno %d", err);
	return buf;
}

/* Kernel's own count of what mlock holds: VmLck in /proc/self/status. */
static long locked_kib(void)
{
	char line[128];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static int oom_read(void)
{
	char buf[16] = "";
	int fd = open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? atoi(buf) : 0;
}

static int oom_write(int v)
{
	char buf[16];
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	int len = snprintf(buf, sizeof(buf), "%d", v), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

/* One pass over every thread there is now: how many it changed, or
 * -errno of the first that refused. */
static int renice_pass(int nice)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int err = 0, changed = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		long tid = strtol(de->d_name, &end, 10);
		if (*end || tid <= 0)
			continue;
		errno = 0;
		int cur = getpriority(PRIO_PROCESS, (id_t)tid);
		if (!errno && cur == nice)
			continue;
		if (setpriority(PRIO_PROCESS, (id_t)tid, nice) == 0)
			changed++;
		else if (errno != ESRCH && !err)
			err = -errno;
	}
	closedir(d);
	return err ? err : changed;
}

int reclaim_renice(int nice)
{
	/* Again until a pass finds nothing to change: a thread cloned at
	 * the old value during one (an io_uring worker of a busy reactor)
	 * is in the next.  Bounded: a process that makes threads faster
	 * than this walks is not the gateway. */
	for (int i = 0; i < 8; i++) {
		int ret = renice_pass(nice);
		if (ret <= 0)
			return ret;
	}
	return 0;
}

static int do_mlock(void)
{
	struct rlimit rl;

	if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0) {
		log_notice("reclaim: %ld KiB locked in memory", locked_kib());
		return 0;
	}
	int err = errno;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		log_warn("reclaim: mlockall: %s; RLIMIT_MEMLOCK is %llu KiB (LimitMEMLOCK= in "
			 "the unit, ulimit -l in a shell) and CAP_IPC_LOCK lifts it; the "
			 "gateway's pages may be swapped out",
			 strerror(err), (unsigned long long)rl.rlim_cur / 1024);
	else
		log_warn("reclaim: mlockall: %s; the gateway's pages may be swapped out",
			 strerror(err));
	return -err;
}

void reclaim_enable(struct reactor **rs, unsigned nr, unsigned self,
		    const struct reclaim_opts *o)
{
	char mbuf[40] = "off", fbuf[40] = "off", nbuf[40] = "off", e1[24];
	int ret;

	if (done)
		return;
	done = true;
	bool mlock = o->mlock;
#if defined(__SANITIZE_ADDRESS__)
	/* Its shadow memory is terabytes of reserved address space. */
	if (mlock)
		log_notice("reclaim: no mlockall in an AddressSanitizer build");
	mlock = false;
#endif
	if (mlock) {
		ret = do_mlock();
		if (ret < 0)
			snprintf(mbuf, sizeof(mbuf), "failed(%s)", err_name(-ret, e1, sizeof(e1)));
		else
			snprintf(mbuf, sizeof(mbuf), "ok");
	}
	if (o->io_flusher) {
		ret = reactor_thread_io_flusher();
		if (ret < 0) {
			snprintf(fbuf, sizeof(fbuf), "failed(%s)", err_name(-ret, e1, sizeof(e1)));
			log_warn("reclaim: PR_SET_IO_FLUSHER: %s (%s); writeback through a "
				 "device the gateway serves may stall under memory pressure",
				 strerror(-ret),
				 ret == -EINVAL ? "Linux 5.6 or later has it"
						: "it needs CAP_SYS_RESOURCE");
		} else {
			snprintf(fbuf, sizeof(fbuf), "ok");
			reactor_io_flusher_for_new_threads(true);
			for (unsigned i = 0; i < nr && i < RECLAIM_MAX_MSGS; i++) {
				if (i == self || !rs[i])
					continue;
				struct flusher_msg *f = &flusher_msgs[i];
				f->id = rs[i]->id;
				f->m.fn = flusher_on_thread;
				reactor_send_msg(rs[i], &f->m);
			}
		}
	}
	if (o->oom && (ret = oom_write(o->oom_score_adj)) < 0)
		log_warn("reclaim: cannot set oom_score_adj %d: %s", o->oom_score_adj,
			 strerror(-ret));
	if (o->renice) {
		ret = reclaim_renice(o->nice);
		if (ret < 0) {
			snprintf(nbuf, sizeof(nbuf), "failed(%s)", err_name(-ret, e1, sizeof(e1)));
			log_warn("reclaim: cannot set nice %d: %s (CAP_SYS_NICE or an RLIMIT_NICE of "
				 "%d lifts it, LimitNICE= in a unit; the shipped unit's seccomp "
				 "filter refuses setpriority: give its Nice= the same value); the "
				 "kernel's own block I/O workers preempt the gateway and its clients "
				 "share its CPU",
				 o->nice, strerror(-ret), 20 - o->nice);
		} else {
			errno = 0;
			int v = getpriority(PRIO_PROCESS, 0);
			snprintf(nbuf, sizeof(nbuf), "%d", errno ? o->nice : v);
		}
	}
	log_notice("reclaim: mlockall=%s io_flusher=%s oom_score_adj=%d nice=%s", mbuf, fbuf,
		   oom_read(), nbuf);
}

bool reclaim_enabled(void) { return done; }

int reclaim_parse_nice(const char *s, struct reclaim_opts *o)
{
	char *end;
	long v;

	if (!strcmp(s, "off")) {
		o->renice = false;
		return 0;
	}
	if (*s != '-' && (*s < '0' || *s > '9'))
		return -EINVAL; /* strtol would skip spaces and take a '+' */
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < -20 || v > 19)
		return -EINVAL;
	o->renice = true;
	o->nice = (int)v;
	return 0;
}
