/* nvmf-gateway mount: the quick lab mode.  One namespace (or a RAM volume
 * with --mem) as one file in a FUSE filesystem at MOUNTPOINT, in the
 * foreground until SIGINT/SIGTERM or umount; -d detaches once the mount is
 * usable, and the parent's exit code says whether it became so. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuse/fusefs.h"
#include "gateway/base/log.h"
#include "gateway/volume/qos.h"
#include "gateway/base/reclaim.h"
#include "gateway/session.h"
#include "gateway/tools.h"

struct mount_cmd {
	struct session *s;
	const char *mountpoint;
	char name[256];
	bool allow_other, debug;
	uid_t uid;
	gid_t gid;
	int ready_fd; /* -d: the parent waits on this pipe */
	struct fusefs *fs;
	bool stopping;
	int rc;
	struct vol_qos_limits qos;
	struct reclaim_opts reclaim;
};

static void mount_stopped(void *arg)
{
	struct mount_cmd *m = arg;

	m->fs = NULL;
	session_finish(m->s, m->rc);
}

static void mount_stop(struct mount_cmd *m, int rc)
{
	if (m->stopping)
		return;
	m->stopping = true;
	m->rc = rc;
	fusefs_stop(m->fs, mount_stopped, m);
}

static void mount_ready(void *arg)
{
	struct mount_cmd *m = arg;

	log_notice("mount: %s/%s is ready", m->mountpoint, m->name);
	if (m->ready_fd >= 0) {
		/* The parent exits 0 on this byte; from now on we are alone. */
		int fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			dup2(fd, STDOUT_FILENO);
			close(fd);
		}
		if (write(m->ready_fd, "R", 1) != 1)
			log_warn("mount: cannot tell the parent: %s", strerror(errno));
		close(m->ready_fd);
		m->ready_fd = -1;
	}
}

/* umount / fusermount3 -u: a clean end; a failed session: exit 1.  Nobody
 * is left to take the replies of I/O waiting for a path: drained, as on a
 * signal, not held until ctrl_loss_tmo. */
static void mount_gone(void *arg, int err)
{
	struct mount_cmd *m = arg;

	if (m->s && m->s->vol)
		vol_drain(m->s->vol);
	mount_stop(arg, err ? 1 : 0);
}

static void mount_signal(struct session *s)
{
	/* As for nbd: waiting I/O must not hold the unmount for ctrl_loss_tmo. */
	if (s->vol)
		vol_drain(s->vol);
	mount_stop(s->priv, 0);
}

static void mount_job(struct session *s)
{
	struct mount_cmd *m = s->priv;
	struct fusefs_file f = { .name = m->name, .vol = s->vol, .read_only = s->read_only };
	struct fusefs_opts o = {
		.mountpoint = m->mountpoint,
		.allow_other = m->allow_other,
		.debug = m->debug,
		.uid = m->uid,
		.gid = m->gid,
		.files = &f,
		.nr_files = 1,
		.on_ready = mount_ready,
		.on_gone = mount_gone,
		.arg = m,
	};
	char caps[128];

	/* --max-xfer caps the RAM volume too, so that the splitting of large
	 * FUSE requests is testable without a target.  Nothing has used the
	 * volume yet. */
	if (s->mem_size && s->opts.max_xfer && s->opts.max_xfer < s->vol->max_io)
		s->vol->max_io = s->opts.max_xfer & ~(s->vol->block_size - 1) ?: s->vol->block_size;
	if (qos_limited(&m->qos) && vol_set_qos(s->vol, &m->qos) < 0) {
		session_finish(s, 1);
		return;
	}
	log_notice("mount: %s: %llu bytes, block %u, preferred I/O %u, max I/O %u, caps %s",
		   m->name, (unsigned long long)vol_size(s->vol), s->vol->block_size, s->vol->pref_io,
		   s->vol->max_io, vol_caps_str(s->vol->caps, caps, sizeof(caps)));
	struct reactor *rp = &s->r;
	reclaim_enable(&rp, 1, 0, &m->reclaim);
	if (fusefs_start(&s->r, &o, &m->fs) < 0) {
		session_finish(s, 1);
		return;
	}
	s->on_signal = mount_signal;
}

/* The parent of -d: exit 0 once the child's mount is usable, else 1. */
static int wait_ready(int fd, pid_t child)
{
	char c;
	ssize_t n;
	int st;

	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1) {
		printf("%d\n", (int)child);
		return 0;
	}
	waitpid(child, &st, 0);
	fprintf(stderr, "nvmf-gateway mount: the mount did not come up (exit %d)\n",
		WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return 1;
}

static int parse_id(const char *arg, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || !*arg || *end || v > 0xfffffffful)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int cmd_mount(int argc, char **argv)
{
	static const struct option longopts[] = {
		SESSION_LONGOPTS,
		{ "name", required_argument, 0, 2000 },
		{ "read-only", no_argument, 0, 'r' },
		{ "allow-other", no_argument, 0, 2001 },
		{ "uid", required_argument, 0, 2002 },
		{ "gid", required_argument, 0, 2003 },
		{ "mem", required_argument, 0, 2004 },
		{ "daemon", no_argument, 0, 'd' },
		{ "fuse-debug", no_argument, 0, 2005 },
		{ "no-reclaim", no_argument, 0, 2006 },
		{ "nice", required_argument, 0, 2007 },
		QOS_LONGOPTS,
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct session s;
	struct mount_cmd m = { .s = &s, .ready_fd = -1, .uid = getuid(), .gid = getgid(),
			       .reclaim = RECLAIM_OPTS_DEFAULT };
	bool daemon = false;
	char *abs_mp = NULL;
	int opt, rc;
	bool no_reclaim = false;
	unsigned id;

	session_defaults(&s, "4420");
	while ((opt = getopt_long(argc, argv, SESSION_SHORTOPTS SESSION_PATH_SHORTOPTS "vhrd", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'h':
			printf("usage: nvmf-gateway mount -t tcp -a ADDR [-s PORT] -n NQN [--nsid N]\n"
			       "         [--name FILE] [--read-only] [--allow-other] [--uid N] "
			       "[--gid N] [-d] MOUNTPOINT\n"
			       "       nvmf-gateway mount --mem SIZE[:BLOCK] [...] MOUNTPOINT\n\n"
			       "Serves the namespace as the file MOUNTPOINT/FILE (default nsN) until\n"
			       "SIGINT/SIGTERM or umount MOUNTPOINT.\n\n"
			       "      --name FILE            the file's name\n"
			       "  -r, --read-only            refuse writes (mode 0400)\n"
			       "      --allow-other          let other users in (FUSE allow_other)\n"
			       "      --uid N, --gid N       the file's owner (default ours)\n"
			       "  -d, --daemon               detach once mounted; prints the pid\n"
			       "      --fuse-debug           trace every FUSE request on stderr\n"
			       "      --no-reclaim           no mlockall, PR_SET_IO_FLUSHER, oom_score_adj or nice\n"
			       "      --nice N|off           the gateway's priority (default -20, as the\n"
			       "                             kernel's own block I/O workers)\n"
			       QOS_HELP SESSION_MEM_HELP SESSION_HELP);
			return 0;
		case 2000:
			if (!*optarg || strchr(optarg, '/') || strlen(optarg) >= sizeof(m.name) ||
			    !strcmp(optarg, ".") || !strcmp(optarg, "..")) {
				fprintf(stderr, "nvmf-gateway mount: --name '%s': a plain file name\n",
					optarg);
				return 1;
			}
			snprintf(m.name, sizeof(m.name), "%s", optarg);
			break;
		case 'r':
			s.read_only = true;
			break;
		case 2001:
			m.allow_other = true;
			break;
		case 2002:
		case 2003:
			if (parse_id(optarg, &id) < 0) {
				fprintf(stderr, "nvmf-gateway mount: bad %s '%s'\n",
					opt == 2002 ? "uid" : "gid", optarg);
				return 1;
			}
			if (opt == 2002)
				m.uid = id;
			else
				m.gid = id;
			break;
		case 2004:
			if (session_parse_mem(&s, optarg) < 0)
				return 1;
			break;
		case 'd':
			daemon = true;
			break;
		case 2005:
			m.debug = true;
			break;
		case 2006:
			no_reclaim = true; /* after the loop: whatever --nice said */
			break;
		case 2007:
			if (reclaim_parse_nice(optarg, &m.reclaim) < 0) {
				fprintf(stderr, "nvmf-gateway mount: --nice '%s': -20..19 or off\n", optarg);
				return 1;
			}
			break;
		default:
			rc = qos_parse_opt("mount", opt, optarg, &m.qos);
			if (rc < 0)
				return 1;
			if (rc)
				break;
			rc = session_parse_opt(&s, opt, optarg);
			if (rc < 0)
				return 1;
			if (rc == 0) {
				fprintf(stderr, "nvmf-gateway mount: see --help\n");
				return 1;
			}
		}
	}
	if (no_reclaim)
		m.reclaim = RECLAIM_OPTS_OFF;
	if (optind != argc - 1) {
		fprintf(stderr, "nvmf-gateway mount: one MOUNTPOINT is required (see --help)\n");
		return 1;
	}
	m.mountpoint = argv[optind];
	if (m.mountpoint[0] != '/') {
		/* the daemon leaves the working directory */
		char *cwd = getcwd(NULL, 0);
		if (!cwd || asprintf(&abs_mp, "%s/%s", cwd, m.mountpoint) < 0) {
			perror("nvmf-gateway mount: getcwd");
			return 1;
		}
		free(cwd);
		m.mountpoint = abs_mp;
	}
	if (!m.name[0])
		snprintf(m.name, sizeof(m.name), "ns%u", s.nsid);
	s.want_volume = true;
	s.priv = &m;

	/* Fork before any ring or thread exists. */
	if (daemon) {
		int p[2];
		pid_t pid;

		if (pipe2(p, O_CLOEXEC) < 0) {
			perror("nvmf-gateway mount: pipe");
			return 1;
		}
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			perror("nvmf-gateway mount: fork");
			return 1;
		}
		if (pid > 0) {
			close(p[1]);
			return wait_ready(p[0], pid);
		}
		close(p[0]);
		setsid();
		if (chdir("/") < 0)
			return 1;
		m.ready_fd = p[1];
	}
	rc = session_run(&s, mount_job);
	free(abs_mp);
	return rc;
}
