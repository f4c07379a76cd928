/* /dev/nbdN through the kernel's nbd generic netlink family; see kdev.h. */
#include "nbd/kdev.h"
#include "nbd/kdev_ioctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nbd-netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "gateway/base/thread_stack.h"

/* Transmission flags (NBD protocol document).  Private names: the uapi
 * header of older distributions lacks some, and nbd/ has its own. */
#define KF_HAS_FLAGS (1u << 0)
#define KF_READ_ONLY (1u << 1)
#define KF_SEND_FLUSH (1u << 2)
#define KF_SEND_FUA (1u << 3)
#define KF_SEND_TRIM (1u << 5)
#define KF_SEND_WRITE_ZEROES (1u << 6)
#define KF_CAN_MULTI_CONN (1u << 8)
/* What the kernel driver acts on.  WRITE_ZEROES is honoured since Linux
 * 6.11; an older kernel ignores the bit and simply never sends the
 * command, so it is passed whenever the export has it. */
#define KF_KERNEL_MASK                                                                  \
	(KF_HAS_FLAGS | KF_READ_ONLY | KF_SEND_FLUSH | KF_SEND_FUA | KF_SEND_TRIM |     \
	 KF_SEND_WRITE_ZEROES | KF_CAN_MULTI_CONN)

#define KDEV_MAX_DEVICES 4096
#define KDEV_SYSBLOCK "/sys/block"
/* How long detach waits for NBD_DO_IT after NBD_DISCONNECT, and again
 * after NBD_CLEAR_SOCK. */
#define KDEV_DOIT_STOP_MS 10000

enum kdev_state {
	KDEV_ATTACHING,
	KDEV_ATTACHED,
	KDEV_FAILED, /* attach failed: closing the connections */
	KDEV_DETACHING,
	KDEV_GONE,
};

/* No default: -Wswitch names a state added without a name. */
static const char *kdev_state_name(enum kdev_state s)
{
	switch (s) {
	case KDEV_ATTACHING: return "attaching";
	case KDEV_ATTACHED: return "attached";
	case KDEV_FAILED: return "failed";
	case KDEV_DETACHING: return "detaching";
	case KDEV_GONE: return "gone";
	}
	return "?";
}

enum kdev_job { KDEV_JOB_ATTACH, KDEV_JOB_DETACH, KDEV_JOB_RESIZE };

struct kdev_conn {
	struct nbd_kdev *d;
	unsigned i;
	struct nbd_conn *conn; /* NULL once closed */
	int kfd; /* the kernel's end, ours until the helper has passed it on */
	int sfd; /* our end, until nbd_conn_start_kernel owns it */
};

struct nbd_kdev {
	struct reactor *r;
	struct nbd_export *e;
	uint64_t loss_seen; /* the device's flushes' (nbd_conn_share_loss_cursor) */
	enum kdev_state state;
	int index; /* -1 until known */
	bool reattached;
	int want_index;
	unsigned dead_conn_timeout_s;
	uint64_t server_flags;
	char backend[320], legacy_backend[320];
	bool backend_file; /* the kernel showed it once attached (5.14+) */
	const char *family_name;
	const char *dev_dir, *sysblock;
	enum nbd_kdev_iface want_iface, iface; /* iface: set by the attach job */
	struct kdev_doit doit; /* the ioctl interface */
	bool doit_seen; /* its thread's exit message arrived */
	int lock_fd;
	/* The helper thread's job; it touches only these and the kfds until
	 * it posts msg, and nothing after. */
	enum kdev_job job;
	int job_err;
	bool job_running;
	struct reactor_msg msg;
	bool closing_all;
	/* nbd_kdev_resize: the size the kernel was last given, a resize to
	 * run after the job in flight, a detach waiting for a resize job. */
	uint64_t kernel_size;
	uint64_t job_size;
	uint64_t job_seen_size; /* a resize: the device's size afterwards (sysfs) */
	bool resize_again, detach_waits;
	bool resize_ignored; /* the kernel kept the old size: said once per change */
	nbd_kdev_attached_fn attached;
	void *attached_arg;
	void (*done)(void *arg);
	void *done_arg;
	unsigned nr_conns, live;
	struct kdev_conn conns[];
};

static const char *kdev_name(const struct nbd_kdev *d, char *buf, size_t len)
{
	if (d->index >= 0)
		snprintf(buf, len, "nbd%d", d->index);
	else
		snprintf(buf, len, "nbd (%s)", d->e->name);
	return buf;
}

static bool kdev_set_state(struct nbd_kdev *d, enum kdev_state to)
{
	static const unsigned allowed[] = {
		[KDEV_ATTACHING] = 1u << KDEV_ATTACHED | 1u << KDEV_FAILED,
		[KDEV_ATTACHED] = 1u << KDEV_DETACHING,
		[KDEV_FAILED] = 1u << KDEV_GONE,
		[KDEV_DETACHING] = 1u << KDEV_GONE,
		[KDEV_GONE] = 0,
	};
	char nm[64];

	if (!(allowed[d->state] & (1u << to))) {
		log_err("%s: illegal state change %s -> %s", kdev_name(d, nm, sizeof(nm)),
			kdev_state_name(d->state), kdev_state_name(to));
		return false;
	}
	log_debug("%s: %s -> %s", kdev_name(d, nm, sizeof(nm)), kdev_state_name(d->state),
		  kdev_state_name(to));
	d->state = to;
	return true;
}

const char *nbd_kdev_iface_name(int iface)
{
	static const char *const names[] = { "auto", "netlink", "ioctl" };

	return iface >= 0 && iface < 3 ? names[iface] : "?";
}

int nbd_kdev_choose(enum nbd_kdev_iface want, bool family_present)
{
	switch (want) {
	case NBD_IFACE_AUTO: return family_present ? NBD_IFACE_NETLINK : NBD_IFACE_IOCTL;
	case NBD_IFACE_NETLINK: return family_present ? NBD_IFACE_NETLINK : -ENODEV;
	case NBD_IFACE_IOCTL: return NBD_IFACE_IOCTL;
	}
	return -EINVAL;
}

/* ---- Messages ---------------------------------------------------------- */

int nbd_kdev_msg_build(int family, const struct nbd_kdev_req *req, struct nl_msg **out)
{
	struct nl_msg *msg = nlmsg_alloc();
	struct nlattr *socks, *item;

	if (!msg)
		return -ENOMEM;
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, 0, req->cmd, NBD_GENL_VERSION))
		goto full;
	if (req->index >= 0 && nla_put_u32(msg, NBD_ATTR_INDEX, (uint32_t)req->index) < 0)
		goto full;
	if (req->size && nla_put_u64(msg, NBD_ATTR_SIZE_BYTES, req->size) < 0)
		goto full;
	if (req->block_size && nla_put_u64(msg, NBD_ATTR_BLOCK_SIZE_BYTES, req->block_size) < 0)
		goto full;
	if (req->cmd == NBD_CMD_CONNECT &&
	    nla_put_u64(msg, NBD_ATTR_SERVER_FLAGS, req->server_flags) < 0)
		goto full;
	if ((req->cmd == NBD_CMD_CONNECT || req->cmd == NBD_CMD_RECONFIGURE) &&
	    nla_put_u64(msg, NBD_ATTR_CLIENT_FLAGS, req->client_flags) < 0)
		goto full;
	if (req->dead_conn_timeout_s &&
	    nla_put_u64(msg, NBD_ATTR_DEAD_CONN_TIMEOUT, req->dead_conn_timeout_s) < 0)
		goto full;
	if (req->set_timeout && nla_put_u64(msg, NBD_ATTR_TIMEOUT, req->timeout_s) < 0)
		goto full;
	if (req->backend && nla_put_string(msg, NBD_ATTR_BACKEND_IDENTIFIER, req->backend) < 0)
		goto full;
	if (req->nr_fds) {
		socks = nla_nest_start(msg, NBD_ATTR_SOCKETS);
		if (!socks)
			goto full;
		for (unsigned i = 0; i < req->nr_fds; i++) {
			item = nla_nest_start(msg, NBD_SOCK_ITEM);
			if (!item || nla_put_u32(msg, NBD_SOCK_FD, (uint32_t)req->fds[i]) < 0)
				goto full;
			nla_nest_end(msg, item);
		}
		nla_nest_end(msg, socks);
	}
	*out = msg;
	return 0;
full:
	nlmsg_free(msg);
	return -EMSGSIZE;
}

static struct nla_policy kdev_attr_policy[NBD_ATTR_MAX + 1] = {
	[NBD_ATTR_INDEX] = { .type = NLA_U32 },
	[NBD_ATTR_DEVICE_LIST] = { .type = NLA_NESTED },
};

static struct nla_policy kdev_dev_policy[NBD_DEVICE_ATTR_MAX + 1] = {
	[NBD_DEVICE_INDEX] = { .type = NLA_U32 },
	[NBD_DEVICE_CONNECTED] = { .type = NLA_U8 },
};

int nbd_kdev_parse_status(struct nlmsghdr *nlh, struct nbd_kdev_devstat *devs, unsigned max)
{
	struct nlattr *tb[NBD_ATTR_MAX + 1], *dtb[NBD_DEVICE_ATTR_MAX + 1], *item;
	unsigned n = 0;
	int rem;

	if (genlmsg_parse(nlh, 0, tb, NBD_ATTR_MAX, kdev_attr_policy) < 0 ||
	    !tb[NBD_ATTR_DEVICE_LIST])
		return -EINVAL;
	nla_for_each_nested(item, tb[NBD_ATTR_DEVICE_LIST], rem) {
		if (nla_type(item) != NBD_DEVICE_ITEM)
			return -EINVAL;
		if (nla_parse_nested(dtb, NBD_DEVICE_ATTR_MAX, item, kdev_dev_policy) < 0 ||
		    !dtb[NBD_DEVICE_INDEX])
			return -EINVAL;
		if (n == max)
			break;
		devs[n].index = (int)nla_get_u32(dtb[NBD_DEVICE_INDEX]);
		devs[n].connected = dtb[NBD_DEVICE_CONNECTED] && nla_get_u8(dtb[NBD_DEVICE_CONNECTED]);
		if (devs[n].index < 0)
			return -EINVAL;
		n++;
	}
	return (int)n;
}

int nbd_kdev_parse_connect_reply(struct nlmsghdr *nlh)
{
	struct nlattr *tb[NBD_ATTR_MAX + 1];
	int index;

	if (genlmsg_parse(nlh, 0, tb, NBD_ATTR_MAX, kdev_attr_policy) < 0 || !tb[NBD_ATTR_INDEX])
		return -EINVAL;
	index = (int)nla_get_u32(tb[NBD_ATTR_INDEX]);
	return index < 0 ? -EINVAL : index;
}

bool nbd_kdev_backend_matches(const char *text, const char *backend_id)
{
	size_t n = strlen(backend_id);

	/* sysfs adds one newline; anything else is another backend. */
	return n && !strncmp(text, backend_id, n) &&
	       (text[n] == '\0' || (text[n] == '\n' && text[n + 1] == '\0'));
}

int nbd_kdev_sysfs_size(const char *sysblock, int index, uint64_t *bytes)
{
	char path[256], text[32];
	unsigned long long sectors;
	char *end;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/nbd%d/size", sysblock, index);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EINVAL;
	text[n] = '\0';
	errno = 0;
	sectors = strtoull(text, &end, 10);
	if (errno || end == text || (*end && *end != '\n') || sectors > UINT64_MAX / 512)
		return -EINVAL;
	*bytes = (uint64_t)sectors * 512;
	return 0;
}

int nbd_kdev_resize_verify(const char *sysblock, int index, uint64_t want, uint64_t *have,
			   unsigned tries, unsigned wait_ms)
{
	int r = 0;

	/* The kernel sets the capacity before it answers; a few short reads
	 * again only cover a slow sysfs update. */
	for (unsigned i = 0; i < tries; i++) {
		if (i)
			usleep(wait_ms * 1000u);
		r = nbd_kdev_sysfs_size(sysblock, index, have);
		if (r == 0 && *have == want)
			return 0;
	}
	return r < 0 ? r : -EOPNOTSUPP;
}

/* SYSBLOCK/nbdN/backend into buf; false when absent (not ours: a device
 * attached by ioctl or another tool has none). */
static bool kdev_read_backend(const char *sysblock, int index, char *buf, size_t len)
{
	char path[256];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/nbd%d/backend", sysblock, index);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return true;
}

int nbd_kdev_plan(const char *sysblock, const struct nbd_kdev_devstat *devs, unsigned n,
		  int want_index, const char *backend_id, const char *legacy_id,
		  bool *reconfigure, bool *legacy)
{
	char text[512];
	int owned = -1;

	*reconfigure = false;
	*legacy = false;
	for (unsigned i = 0; i < n; i++) {
		if (!devs[i].connected ||
		    !kdev_read_backend(sysblock, devs[i].index, text, sizeof(text)))
			continue;
		if (nbd_kdev_backend_matches(text, backend_id)) {
			owned = devs[i].index;
			break;
		}
		if (legacy_id && nbd_kdev_backend_matches(text, legacy_id)) {
			owned = devs[i].index;
			*legacy = true;
			break;
		}
		if (devs[i].index == want_index) {
			text[strcspn(text, "\n")] = '\0';
			log_err("nbd%d: in use by backend '%s'", want_index, text);
			return -EBUSY;
		}
	}
	if (owned >= 0 && want_index >= 0 && owned != want_index) {
		log_err("nbd%d: export '%s' is still attached as nbd%d; detach that first",
			want_index, backend_id, owned);
		return -EEXIST;
	}
	if (owned >= 0) {
		*reconfigure = true;
		return owned;
	}
	/* A connected device without a backend file (nbd-client, ioctl) is
	 * busy too; CONNECT would say so, in the kernel log only. */
	for (unsigned i = 0; i < n; i++)
		if (devs[i].index == want_index && devs[i].connected) {
			log_err("nbd%d: in use by another client", want_index);
			return -EBUSY;
		}
	return want_index;
}

uint64_t nbd_kdev_server_flags(uint16_t export_flags, unsigned *connections)
{
	uint64_t f = (export_flags & KF_KERNEL_MASK) | KF_HAS_FLAGS;

	/* The kernel refuses several sockets to a server without multi-conn. */
	if (*connections > 1 && !(f & KF_CAN_MULTI_CONN))
		*connections = 1;
	return f;
}

/* Read replies leave through the gateway's end, sv[0]: with the default
 * 208 KiB a 128 KiB reply and a half fit, and a spliced reply waits on the
 * kernel's receive worker between its pieces.  With 4 MiB (each way, as
 * measured), 128K reads at QD8 on /dev/nbd0 in the TCG guest ran 861-945
 * IOPS against 802-848, at 0.81-0.93 of the gateway's CPU per read,
 * alternated over three rounds; 128K writes were level (629-688 against
 * 649-679).  The kernel's end keeps its default: the driver sends with
 * __GFP_MEMALLOC, and what its send buffer holds may come from the
 * emergency reserves just when the gateway is slow under pressure. */
int nbd_kdev_socketpair(int sv[2])
{
	int sz = NBD_KDEV_SNDBUF;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	/* Under the shipped unit (no CAP_NET_ADMIN) wmem_max decides: say
	 * so once, with the way to the larger buffer. */
	static bool told;
	int got = 0;
	socklen_t len = sizeof(got);
	if (!__atomic_exchange_n(&told, true, __ATOMIC_RELAXED) &&
	    getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &got, &len) == 0 && got < 2 * sz)
		log_info("nbd: kernel device sockets get a %d KiB send buffer, not %d KiB: "
			 "net.core.wmem_max >= %d (or CAP_NET_ADMIN) speeds up large reads",
			 got / 2048, sz >> 10, sz);
	return 0;
}

/* ---- Netlink exchange (helper thread only) ----------------------------- */

struct kdev_exch {
	int err; /* from the kernel's error message */
	int parse_err;
	bool done;
	int (*parse)(struct nlmsghdr *nlh, void *arg);
	void *arg;
};

static int exch_valid(struct nl_msg *msg, void *arg)
{
	struct kdev_exch *x = arg;
	int r;

	if (x->parse) {
		r = x->parse(nlmsg_hdr(msg), x->arg);
		if (r < 0)
			x->parse_err = r;
	}
	return NL_OK;
}

static int exch_ack(struct nl_msg *msg, void *arg)
{
	struct kdev_exch *x = arg;

	(void)msg;
	x->done = true;
	return NL_STOP;
}

static int exch_error(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	struct kdev_exch *x = arg;

	(void)nla;
	x->err = e->error < 0 ? e->error : -EIO;
	x->done = true;
	return NL_STOP;
}

/* Sends msg (freed) and waits for the kernel's answer: 0 or -errno.
 * Blocking, which is why only the helper thread calls it. */
static int kdev_exchange(struct nl_sock *sk, struct nl_msg *msg,
			 int (*parse)(struct nlmsghdr *nlh, void *arg), void *arg)
{
	struct kdev_exch x = { .parse = parse, .arg = arg };
	struct nl_cb *cb = nl_cb_alloc(NL_CB_DEFAULT);
	int r;

	if (!cb) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, exch_valid, &x);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, exch_ack, &x);
	nl_cb_err(cb, NL_CB_CUSTOM, exch_error, &x);
	r = nl_send_auto(sk, msg);
	nlmsg_free(msg);
	if (r < 0) {
		log_err("nbd: netlink send failed: %s", nl_geterror(r));
		nl_cb_put(cb);
		return -EIO;
	}
	while (!x.done) {
		r = nl_recvmsgs(sk, cb);
		if (r < 0 && !x.done) {
			log_err("nbd: netlink receive failed: %s", nl_geterror(r));
			x.err = -EIO;
			break;
		}
	}
	nl_cb_put(cb);
	return x.err ? x.err : x.parse_err;
}

/* quiet: a missing family is not an error (auto falls back to ioctl). */
static struct nl_sock *kdev_nl_open(const char *name, int *family, bool quiet)
{
	struct nl_sock *sk = nl_socket_alloc();
	int r;

	if (!sk) {
		log_err("nbd: cannot allocate a netlink socket");
		return NULL;
	}
	r = genl_connect(sk);
	if (r < 0) {
		log_err("nbd: cannot open a generic netlink socket: %s", nl_geterror(r));
		nl_socket_free(sk);
		return NULL;
	}
	r = genl_ctrl_resolve(sk, name);
	if (r < 0 && quiet) {
		nl_socket_free(sk);
		return NULL;
	}
	if (r < 0) {
		log_err("nbd: the kernel has no '%s' netlink family: is the nbd module loaded? "
			"(modprobe nbd)", name);
		nl_socket_free(sk);
		return NULL;
	}
	*family = r;
	return sk;
}

struct kdev_status_buf {
	struct nbd_kdev_devstat *devs;
	unsigned n;
};

static int kdev_status_parse(struct nlmsghdr *nlh, void *arg)
{
	struct kdev_status_buf *b = arg;
	int r = nbd_kdev_parse_status(nlh, b->devs, KDEV_MAX_DEVICES);

	if (r < 0)
		return r;
	b->n = (unsigned)r;
	return 0;
}

static int kdev_connect_parse(struct nlmsghdr *nlh, void *arg)
{
	int r = nbd_kdev_parse_connect_reply(nlh);

	if (r >= 0)
		*(int *)arg = r;
	return r < 0 ? r : 0;
}

/* The run-time folder for device locks: a lock is held by the process that
 * serves the device, so a crash frees it and a second gateway cannot steal
 * the device of a live one (RECONFIGURE would quietly ignore its sockets). */
static int kdev_lock(int index, bool quiet_busy)
{
	const char *dir = getenv("NVMF_GATEWAY_RUN_DIR");
	char path[512];
	int fd;

	if (!dir || !*dir)
		dir = "/run/nvmf-gateway";
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		log_err("nbd%d: cannot create %s: %s", index, dir, strerror(errno));
		return -errno;
	}
	snprintf(path, sizeof(path), "%s/nbd%d.lock", dir, index);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		log_err("nbd%d: cannot open %s: %s", index, path, strerror(errno));
		return -errno;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno;

		close(fd);
		if (err == EWOULDBLOCK) {
			if (!quiet_busy)
				log_err("nbd%d: served by another running gateway (%s is locked)",
					index, path);
			return -EBUSY;
		}
		log_err("nbd%d: cannot lock %s: %s", index, path, strerror(err));
		return -err;
	}
	return fd;
}

static void kdev_close_kfds(struct nbd_kdev *d)
{
	/* The kernel holds its own references to the sockets it took. */
	for (unsigned i = 0; i < d->nr_conns; i++) {
		if (d->conns[i].kfd >= 0)
			close(d->conns[i].kfd);
		d->conns[i].kfd = -1;
	}
}

static int kdev_do_attach_ioctl(struct nbd_kdev *d)
{
	struct volume *v = d->e->vol;
	int r, index, fds[d->nr_conns];
	unsigned taken;

	if (d->want_index >= 0) {
		index = d->want_index;
		d->lock_fd = kdev_lock(index, false);
	} else {
		/* A device is free while its size is 0 and nothing runs
		 * NBD_DO_IT, which stays so for the whole of another attach
		 * (this process's other exports start at once): one locked
		 * by it is taken, the next is looked at. */
		for (int from = 0;; from = index + 1) {
			index = kdev_ioctl_find_free(d->sysblock, from);
			if (index < 0) {
				r = index;
				goto out;
			}
			d->lock_fd = kdev_lock(index, true);
			if (d->lock_fd != -EBUSY)
				break;
			log_info("nbd%d: being attached by another export or gateway; trying the next",
				 index);
		}
	}
	if (d->lock_fd < 0) {
		r = d->lock_fd;
		goto out;
	}
	for (unsigned i = 0; i < d->nr_conns; i++)
		fds[i] = d->conns[i].kfd;
	d->doit.index = index;
	r = kdev_ioctl_setup(&d->doit, d->sysblock, d->dev_dir, vol_size(v), v->block_size,
			     d->server_flags, fds, d->nr_conns, &taken);
	if (!r)
		r = kdev_doit_start(&d->doit);
	if (r < 0 && !d->doit.started)
		kdev_ioctl_release(&d->doit);
	else if (r < 0)
		kdev_doit_stop(&d->doit, KDEV_DOIT_STOP_MS);
	if (!r)
		d->index = index;
out:
	kdev_close_kfds(d);
	return r;
}

static int kdev_do_attach_netlink(struct nbd_kdev *d, struct nl_sock *sk, int family);

static int kdev_do_attach(struct nbd_kdev *d)
{
	struct nl_sock *sk;
	int family, r;

	/* Forced ioctl: no netlink at all (a kernel may lack generic netlink). */
	sk = d->want_iface == NBD_IFACE_IOCTL
		     ? NULL
		     : kdev_nl_open(d->family_name, &family, d->want_iface == NBD_IFACE_AUTO);
	r = nbd_kdev_choose(d->want_iface, sk != NULL);
	if (r < 0) {
		kdev_close_kfds(d);
		return r;
	}
	d->iface = (enum nbd_kdev_iface)r;
	if (d->iface == NBD_IFACE_NETLINK)
		return kdev_do_attach_netlink(d, sk, family);
	if (sk)
		nl_socket_free(sk);
	if (d->want_iface == NBD_IFACE_AUTO)
		log_notice("nbd: the kernel has no '%s' generic netlink family (Linux before "
			   "4.12, or the nbd module missing): using the ioctl interface",
			   d->family_name);
	return kdev_do_attach_ioctl(d);
}

static int kdev_do_attach_netlink(struct nbd_kdev *d, struct nl_sock *sk, int family)
{
	struct kdev_status_buf st = { 0 };
	struct nbd_kdev_req req = { .cmd = NBD_CMD_STATUS, .index = -1 };
	struct volume *v = d->e->vol;
	struct nl_msg *msg;
	bool reconf;
	int r, index, fds[d->nr_conns];

	st.devs = calloc(KDEV_MAX_DEVICES, sizeof(*st.devs));
	if (!st.devs) {
		r = -ENOMEM;
		goto out;
	}
	r = nbd_kdev_msg_build(family, &req, &msg);
	if (r == 0)
		r = kdev_exchange(sk, msg, kdev_status_parse, &st);
	if (r < 0) {
		log_err("nbd: device status query failed: %s", strerror(-r));
		goto out;
	}
	bool legacy;
	index = nbd_kdev_plan(d->sysblock, st.devs, st.n, d->want_index, d->backend,
			      d->legacy_backend[0] ? d->legacy_backend : NULL, &reconf, &legacy);
	if (index < -1) {
		r = index;
		goto out;
	}
	if (legacy) {
		/* The kernel takes a RECONFIGURE naming the device's own id
		 * only; the device keeps it until detached. */
		log_notice("nbd%d: attached by an older gateway as '%s'; reattached under that "
			   "name", index, d->legacy_backend);
		memcpy(d->backend, d->legacy_backend, sizeof(d->backend));
	}
	if (index >= 0) {
		d->lock_fd = kdev_lock(index, false);
		if (d->lock_fd < 0) {
			r = d->lock_fd;
			goto out;
		}
	}
	for (unsigned i = 0; i < d->nr_conns; i++)
		fds[i] = d->conns[i].kfd;
	unsigned kconns = d->nr_conns;
	if (reconf) {
		unsigned have = nbd_kdev_sysfs_conns(d->sysblock, index);
		if (have && have != d->nr_conns) {
			log_warn("nbd%d: the kernel keeps the %u connection%s it was attached with; "
				 "%u handed%s: detach and attach it again (export-remove and "
				 "export-add while idle) for %u", index, have, have == 1 ? "" : "s",
				 d->nr_conns, have > d->nr_conns ? ", the rest stay dead" : "",
				 d->nr_conns);
			kconns = have;
		}
	}
	req = nbd_kdev_attach_req(reconf, index, d->job_size, v->block_size, d->server_flags,
				  d->dead_conn_timeout_s, d->backend, fds, d->nr_conns, kconns);
	r = nbd_kdev_msg_build(family, &req, &msg);
	if (r == 0)
		r = kdev_exchange(sk, msg, reconf ? NULL : kdev_connect_parse, &index);
	if (r < 0) {
		if (reconf)
			log_err("nbd%d: reconfigure with fresh sockets failed: %s", index,
				strerror(-r));
		else if (index >= 0)
			log_err("nbd%d: connect failed: %s%s", index, strerror(-r),
				r == -EBUSY ? " (device in use)" : "");
		else
			log_err("nbd: connect to a free device failed: %s", strerror(-r));
		goto out;
	}
	if (index < 0) {
		log_err("nbd: the kernel's connect reply names no device");
		r = -EIO;
		goto out;
	}
	if (d->lock_fd < 0) {
		/* The kernel picked a free device: nobody else serves it. */
		d->lock_fd = kdev_lock(index, false);
		if (d->lock_fd < 0)
			log_warn("nbd%d: running without the device lock", index);
	}
	d->index = index;
	d->reattached = reconf;
	char text[512];
	d->backend_file = kdev_read_backend(d->sysblock, index, text, sizeof(text));
out:
	kdev_close_kfds(d);
	free(st.devs);
	nl_socket_free(sk);
	return r;
}

static int kdev_do_detach(struct nbd_kdev *d)
{
	struct nbd_kdev_req req = { .cmd = NBD_CMD_DISCONNECT, .index = d->index };
	struct nl_msg *msg;
	struct nl_sock *sk;
	char path[64];
	int family, fd, r;

	/* The device may have been disconnected under us (nbd-client -d, a
	 * netlink DISCONNECT of someone else) and given to another user
	 * since: its flush and its DISCONNECT would be theirs.  Told by the
	 * device's backend file, where the kernel has one (5.14+: it had
	 * one once attached); before, nothing tells. */
	if (d->iface == NBD_IFACE_NETLINK && d->backend_file) {
		char text[512] = "none", shown[512];
		bool have = kdev_read_backend(d->sysblock, d->index, text, sizeof(text));

		if (!have || !nbd_kdev_backend_matches(text, d->backend)) {
			log_printable(shown, sizeof(shown), text, strcspn(text, "\n"));
			log_notice("nbd%d: no longer this export's device (backend '%s'): left "
				   "alone", d->index, shown);
			return 0;
		}
	}
	/* Write back what the page cache of the device itself holds while
	 * the connections still serve; DISCONNECT fails whatever is queued. */
	snprintf(path, sizeof(path), "%s/nbd%d", d->dev_dir, d->index);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (fsync(fd) < 0)
			log_warn("nbd%d: flush before disconnect failed: %s", d->index,
				 strerror(errno));
		close(fd);
	} else {
		log_debug("nbd%d: %s: %s (no flush before disconnect)", d->index, path,
			  strerror(errno));
	}
	if (d->iface == NBD_IFACE_IOCTL)
		return kdev_doit_stop(&d->doit, KDEV_DOIT_STOP_MS);
	sk = kdev_nl_open(d->family_name, &family, false);
	if (!sk)
		return -ENODEV;
	r = nbd_kdev_msg_build(family, &req, &msg);
	if (r == 0)
		r = kdev_exchange(sk, msg, NULL, NULL);
	if (r < 0)
		log_err("nbd%d: disconnect failed: %s", d->index, strerror(-r));
	nl_socket_free(sk);
	return r;
}

struct nbd_kdev_req nbd_kdev_attach_req(bool reconfigure, int index, uint64_t size,
				       uint32_t block_size, uint64_t server_flags,
				       unsigned dead_conn_timeout_s, const char *backend,
				       const int *fds, unsigned nr_fds, unsigned kernel_conns)
{
	return (struct nbd_kdev_req){
		.cmd = reconfigure ? NBD_CMD_RECONFIGURE : NBD_CMD_CONNECT,
		.index = index,
		.size = size,
		.block_size = block_size,
		.server_flags = server_flags,
		/* No DESTROY_ON_DISCONNECT, no DISCONNECT_ON_CLOSE: the device
		 * must outlive us for a restart to pick it up. */
		.client_flags = 0,
		.dead_conn_timeout_s = dead_conn_timeout_s,
		/* nbd/kdev.h: none with one connection, said outright (also at a
		 * reconfigure); the kernel's default with several. */
		.timeout_s = kernel_conns == 1 ? 0 : 30,
		.set_timeout = true,
		.backend = backend,
		.fds = fds,
		.nr_fds = nr_fds,
	};
}

unsigned nbd_kdev_sysfs_conns(const char *sysblock, int index)
{
	char path[256];
	struct dirent *de;
	unsigned n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/nbd%d/mq", sysblock, index);
	if (!(dir = opendir(path)))
		return 0;
	while ((de = readdir(dir)))
		n += de->d_name[0] >= '0' && de->d_name[0] <= '9';
	closedir(dir);
	return n;
}

struct nbd_kdev_req nbd_kdev_resize_req(int index, uint64_t size, uint32_t block_size,
				       const char *backend)
{
	return (struct nbd_kdev_req){
		.cmd = NBD_CMD_RECONFIGURE,
		.index = index,
		.size = size,
		.block_size = block_size,
		/* The kernel refuses a reconfigure of a device with a backend
		 * identifier unless the message names the same one. */
		.backend = backend,
	};
}

/* The device takes the volume's new size (RECONFIGURE with only the size:
 * the kernel keeps its sockets and flags and tells the block layer, which
 * sends the uevent udev and LVM see).  On the helper thread: the kernel
 * may wait there for I/O that the reactors answer (nbs #6116). */
static int kdev_do_resize(struct nbd_kdev *d)
{
	struct nbd_kdev_req req =
		nbd_kdev_resize_req(d->index, d->job_size, d->e->vol->block_size, d->backend);
	struct nl_msg *msg;
	struct nl_sock *sk;
	int family, r;

	sk = kdev_nl_open(d->family_name, &family, false);
	if (!sk)
		return -ENODEV;
	r = nbd_kdev_msg_build(family, &req, &msg);
	if (r == 0)
		r = kdev_exchange(sk, msg, NULL, NULL);
	nl_socket_free(sk);
	if (r < 0)
		return r;
	/* Kernels before the size attribute was honoured in RECONFIGURE
	 * answer success and leave the size: what the device has is what
	 * counts.  -EOPNOTSUPP: it did not change; job_seen_size says what
	 * it has. */
	d->job_seen_size = 0;
	r = nbd_kdev_resize_verify(d->sysblock, d->index, d->job_size, &d->job_seen_size, 10, 20);
	if (r < 0 && r != -EOPNOTSUPP) {
		/* sysfs did not answer: the kernel took the request and no
		 * read says otherwise; a failure to read is not a kernel that
		 * ignores the size. */
		log_warn("/dev/nbd%d: the resize to %llu bytes could not be read back from "
			 "sysfs: %s", d->index, (unsigned long long)d->job_size, strerror(-r));
		d->job_seen_size = 0;
		r = 0;
	}
	return r;
}

/* ---- Reactor side ------------------------------------------------------ */

static void kdev_free(struct nbd_kdev *d)
{
	for (unsigned i = 0; i < d->nr_conns; i++)
		if (d->conns[i].kfd >= 0)
			close(d->conns[i].kfd);
	if (d->lock_fd >= 0)
		close(d->lock_fd);
	kdev_doit_fini(&d->doit);
	free(d);
}

/* When nothing is left running: report and free. */
static void kdev_maybe_finish(struct nbd_kdev *d)
{
	nbd_kdev_attached_fn attached;
	void (*done)(void *);
	void *arg;
	int err;

	/* doit.started is ours to read once the job's message has come. */
	if (d->live || d->job_running || d->closing_all || (d->doit.started && !d->doit_seen))
		return;
	switch (d->state) {
	case KDEV_FAILED:
		kdev_set_state(d, KDEV_GONE);
		attached = d->attached;
		arg = d->attached_arg;
		err = d->job_err ? d->job_err : -EIO;
		kdev_free(d);
		attached(arg, NULL, err);
		break;
	case KDEV_DETACHING: {
		char nm[64];

		kdev_set_state(d, KDEV_GONE);
		if (!d->job_err)
			log_notice("%s: detached", kdev_name(d, nm, sizeof(nm)));
		done = d->done;
		arg = d->done_arg;
		kdev_free(d);
		if (done)
			done(arg);
		break;
	}
	default:
		break;
	}
}

static void kdev_close_all(struct nbd_kdev *d)
{
	d->closing_all = true;
	for (unsigned i = 0; i < d->nr_conns; i++)
		if (d->conns[i].conn)
			nbd_conn_close(d->conns[i].conn);
	d->closing_all = false;
	kdev_maybe_finish(d);
}

static void kdev_conn_closed(void *arg, int err)
{
	struct kdev_conn *c = arg;
	struct nbd_kdev *d = c->d;
	char nm[64];

	c->conn = NULL;
	d->live--;
	switch (d->state) {
	case KDEV_ATTACHING:
		/* RECONFIGURE only takes as many sockets as were dead. */
		log_info("%s: connection %u closed during attach (%s)",
			 kdev_name(d, nm, sizeof(nm)), c->i, err ? strerror(-err) : "not taken");
		break;
	case KDEV_ATTACHED:
		log_warn("%s: connection %u closed by the kernel%s%s; %u left",
			 kdev_name(d, nm, sizeof(nm)), c->i, err ? ": " : "",
			 err ? strerror(-err) : "", d->live);
		if (!d->live)
			log_err("%s: no connection left: the kernel fails I/O after %u s",
				kdev_name(d, nm, sizeof(nm)), d->dead_conn_timeout_s);
		break;
	default:
		kdev_maybe_finish(d);
		break;
	}
}

static void kdev_run_job(struct nbd_kdev *d, enum kdev_job job);

/* The NBD_DO_IT thread has ended. */
static void kdev_doit_done(struct reactor_msg *m)
{
	struct nbd_kdev *d = (struct nbd_kdev *)((char *)m - offsetof(struct nbd_kdev, doit.msg));

	d->doit_seen = true;
	if (d->state == KDEV_ATTACHED)
		log_err("nbd%d: NBD_DO_IT returned (%s) while attached: the kernel dropped the "
			"device; it stays down until the export is re-added or the gateway "
			"restarts", d->index, d->doit.err ? strerror(-d->doit.err) : "disconnected");
	kdev_maybe_finish(d);
}

static void kdev_job_done(struct reactor_msg *m)
{
	struct nbd_kdev *d = (struct nbd_kdev *)((char *)m - offsetof(struct nbd_kdev, msg));
	uint64_t size = vol_size(d->e->vol);
	char nm[64];

	d->job_running = false;
	if (d->job == KDEV_JOB_DETACH) {
		/* The kernel closed its ends; close ours if still open. */
		kdev_close_all(d);
		return;
	}
	if (d->job == KDEV_JOB_RESIZE) {
		if (d->job_err == -EOPNOTSUPP) {
			char seen[48];
			if (d->job_seen_size)
				snprintf(seen, sizeof(seen), "%llu bytes",
					 (unsigned long long)d->job_seen_size);
			else
				snprintf(seen, sizeof(seen), "a size sysfs does not tell");
			log_err("/dev/nbd%d: the kernel accepted the resize to %llu bytes but the "
				"device still has %s: this kernel ignores the size in an NBD "
				"reconfigure; the device keeps serving at its old size until the "
				"export is re-added (or the gateway restarted)",
				d->index, (unsigned long long)d->job_size, seen);
			d->resize_ignored = true;
			/* Not tried again for this size: said once. */
			d->kernel_size = d->job_size;
		} else if (d->job_err)
			log_err("/dev/nbd%d: resize to %llu bytes failed: %s; the device keeps %llu "
				"bytes until the next attach",
				d->index, (unsigned long long)d->job_size, strerror(-d->job_err),
				(unsigned long long)d->kernel_size);
		else
			log_notice("/dev/nbd%d: resized live from %llu to %llu bytes", d->index,
				   (unsigned long long)d->kernel_size,
				   (unsigned long long)d->job_size);
		if (!d->job_err) {
			d->kernel_size = d->job_size;
			d->resize_ignored = false;
		}
		if (d->detach_waits) {
			d->detach_waits = false;
			kdev_run_job(d, KDEV_JOB_DETACH);
		} else if (d->resize_again) {
			d->resize_again = false;
			nbd_kdev_resize(d);
		}
		return;
	}
	if (d->job_err || !d->live) {
		if (!d->job_err) {
			log_err("%s: every connection closed during attach",
				kdev_name(d, nm, sizeof(nm)));
			d->job_err = -ECONNRESET;
		}
		kdev_set_state(d, KDEV_FAILED);
		kdev_close_all(d);
		return;
	}
	kdev_set_state(d, KDEV_ATTACHED);
	d->kernel_size = d->job_size;
	if (d->live > 1)
		log_notice("nbd%d: %u connections: past the kernel's 30 s request timeout "
			   "(a path lost that long) it closes a connection and resends its "
			   "requests on another, which the gateway may still hold; one connection "
			   "(nbd.connections = 1, the default) waits with the gateway",
			   d->index, d->live);
	if (d->iface == NBD_IFACE_IOCTL) {
		log_notice("/dev/nbd%d attached: export '%s', %llu bytes, block %u, "
			   "%u connection%s, flags 0x%llx, interface ioctl",
			   d->index, d->e->name, (unsigned long long)size,
			   d->e->vol->block_size, d->live, d->live == 1 ? "" : "s",
			   (unsigned long long)d->server_flags);
		log_notice("nbd%d: the ioctl interface cannot reattach after a gateway restart "
			   "(the device ends with this process) nor resize the device while "
			   "attached; both need netlink NBD (Linux 4.12+)", d->index);
		d->attached(d->attached_arg, d, d->index);
		return;
	}
	log_notice("/dev/nbd%d %s: export '%s', %llu bytes, block %u, %u connection%s, "
		   "flags 0x%llx, dead_conn_timeout %u s, backend '%s'",
		   d->index, d->reattached ? "reattached (fresh sockets)" : "attached",
		   d->e->name, (unsigned long long)size, d->e->vol->block_size, d->live,
		   d->live == 1 ? "" : "s", (unsigned long long)d->server_flags,
		   d->dead_conn_timeout_s, d->backend);
	d->attached(d->attached_arg, d, d->index);
	/* The volume grew while the helper attached it at the old size. */
	if (d->state == KDEV_ATTACHED && vol_size(d->e->vol) != d->kernel_size)
		nbd_kdev_resize(d);
}

static void *kdev_thread(void *arg)
{
	struct nbd_kdev *d = arg;

	switch (d->job) {
	case KDEV_JOB_ATTACH:
		d->job_err = kdev_do_attach(d);
		break;
	case KDEV_JOB_DETACH:
		d->job_err = kdev_do_detach(d);
		break;
	case KDEV_JOB_RESIZE:
		d->job_err = kdev_do_resize(d);
		break;
	}
	/* The last touch of d on this thread. */
	reactor_send_msg(d->r, &d->msg);
	return NULL;
}

static void kdev_run_job(struct nbd_kdev *d, enum kdev_job job)
{
	pthread_attr_t attr;
	pthread_t t;
	int r;

	d->job = job;
	/* The helper reads no volume field the reactors write. */
	d->job_size = vol_size(d->e->vol);
	d->job_err = 0;
	d->job_running = true;
	d->msg.fn = kdev_job_done;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* Started under mlockall, on a reattach too: not 8 MiB to lock. */
	r = gw_thread_stack(&attr);
	if (!r)
		r = pthread_create(&t, &attr, kdev_thread, d);
	pthread_attr_destroy(&attr);
	if (r) {
		log_err("nbd: cannot start the netlink helper thread: %s", strerror(r));
		d->job_err = -r;
		reactor_defer(d->r, &d->msg);
	}
}

int nbd_kdev_attach(struct reactor *r, struct nbd_export *e, const struct nbd_kdev_opts *o,
		    nbd_kdev_attached_fn cb, void *arg)
{
	unsigned n = o->connections;
	struct nbd_kdev *d;
	uint64_t flags;
	int sv[2], err;

	if (!n || n > 64) {
		log_err("nbd: connections must be 1..64, not %u", n);
		return -EINVAL;
	}
	if (o->iface > NBD_IFACE_IOCTL) {
		log_err("nbd: bad interface %d", (int)o->iface);
		return -EINVAL;
	}
	if (o->index < -1) {
		log_err("nbd: bad device index %d", o->index);
		return -EINVAL;
	}
	flags = nbd_kdev_server_flags(nbd_export_flags(e), &n);
	if (n != o->connections)
		log_notice("nbd: export '%s' does not allow several connections; using 1",
			   e->name);
	d = calloc(1, sizeof(*d) + n * sizeof(d->conns[0]));
	if (!d)
		return -ENOMEM;
	d->r = r;
	d->e = e;
	d->state = KDEV_ATTACHING;
	d->index = -1;
	d->want_index = o->index;
	d->dead_conn_timeout_s = o->dead_conn_timeout_s;
	d->server_flags = flags;
	d->lock_fd = -1;
	d->family_name = o->genl_family ? o->genl_family : NBD_GENL_FAMILY_NAME;
	d->dev_dir = o->dev_dir ? o->dev_dir : "/dev";
	d->sysblock = o->sysblock ? o->sysblock : KDEV_SYSBLOCK;
	d->want_iface = o->iface;
	d->iface = o->iface;
	kdev_doit_init(&d->doit, r, kdev_doit_done);
	d->attached = cb;
	d->attached_arg = arg;
	d->nr_conns = n;
	if (o->backend_id)
		snprintf(d->backend, sizeof(d->backend), "%s", o->backend_id);
	else
		snprintf(d->backend, sizeof(d->backend), "nvmf-gateway:%s", e->name);
	if (o->legacy_backend_id)
		snprintf(d->legacy_backend, sizeof(d->legacy_backend), "%s", o->legacy_backend_id);
	/* All of them first: kdev_free closes every kfd that is not -1, and a
	 * pair that fails part way (EMFILE) leaves the rest as calloc made
	 * them, fd 0. */
	for (unsigned i = 0; i < n; i++)
		d->conns[i] = (struct kdev_conn){ .d = d, .i = i, .kfd = -1, .sfd = -1 };
	for (unsigned i = 0; i < n; i++) {
		if ((err = nbd_kdev_socketpair(sv)) < 0) {
			log_err("nbd: socketpair: %s", strerror(-err));
			for (unsigned j = 0; j < i; j++)
				close(d->conns[j].sfd);
			kdev_free(d);
			return err;
		}
		d->conns[i].kfd = sv[1];
		d->conns[i].sfd = sv[0];
	}
	d->loss_seen = vol_loss_sample(e->vol);
	for (unsigned i = 0; i < n; i++) {
		int fd = d->conns[i].sfd;

		d->conns[i].sfd = -1;
		if (d->job_err) {
			close(fd);
			continue;
		}
		err = nbd_conn_start_kernel(r, e, fd, kdev_conn_closed, &d->conns[i],
					    &d->conns[i].conn);
		if (err < 0) {
			log_err("nbd: cannot serve connection %u: %s", i, strerror(-err));
			close(fd);
			d->job_err = err;
			continue;
		}
		nbd_conn_share_loss_cursor(d->conns[i].conn, &d->loss_seen);
		d->live++;
	}
	if (d->job_err) {
		/* Reported through cb like every later failure. */
		d->job_running = true;
		d->msg.fn = kdev_job_done;
		reactor_defer(r, &d->msg);
		return 0;
	}
	kdev_run_job(d, KDEV_JOB_ATTACH);
	return 0;
}

void nbd_kdev_detach(struct nbd_kdev *d, void (*done)(void *arg), void *arg)
{
	if (!kdev_set_state(d, KDEV_DETACHING))
		return;
	d->done = done;
	d->done_arg = arg;
	if (d->job_running) {
		d->detach_waits = true; /* a resize is on the helper thread */
		return;
	}
	kdev_run_job(d, KDEV_JOB_DETACH);
}

void nbd_kdev_resize(struct nbd_kdev *d)
{
	if (d->state != KDEV_ATTACHED)
		return; /* an attach in flight checks the size when it is done */
	if (d->job_running) {
		d->resize_again = true;
		return;
	}
	if (vol_size(d->e->vol) == d->kernel_size)
		return;
	if (d->iface == NBD_IFACE_IOCTL) {
		/* Growth only reaches here: the smaller device loses nothing. */
		log_warn("/dev/nbd%d: the namespace is now %llu bytes, but the ioctl interface "
			 "cannot resize the device live: it keeps %llu bytes until the export "
			 "is re-added", d->index, (unsigned long long)vol_size(d->e->vol),
			 (unsigned long long)d->kernel_size);
		d->kernel_size = vol_size(d->e->vol); /* said once per change */
		return;
	}
	kdev_run_job(d, KDEV_JOB_RESIZE);
}

bool nbd_kdev_resize_ignored(const struct nbd_kdev *d)
{
	return d->resize_ignored;
}

int nbd_kdev_index(const struct nbd_kdev *d)
{
	return d->index;
}

enum nbd_kdev_iface nbd_kdev_interface(const struct nbd_kdev *d)
{
	return d->iface;
}

bool nbd_kdev_reattached(const struct nbd_kdev *d)
{
	return d->reattached;
}
