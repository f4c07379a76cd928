/* The kernel NBD device: /dev/nbdN attached by the gateway itself through
 * the kernel's "nbd" generic netlink family (no nbd-client binary).
 *
 * Each connection is a socketpair: one end goes to the kernel in the
 * CONNECT (or RECONFIGURE) message, the other is served in transmission
 * phase by nbd_conn_start_kernel() on the reactor.  The device is attached
 * without destroy-on-disconnect and with a dead-connection timeout, so it
 * outlives a gateway crash: the next start finds it by its backend
 * identifier and hands it fresh sockets (RECONFIGURE), and the I/O the
 * kernel held meanwhile resumes.
 *
 * Netlink work happens only at attach and detach, on a short-lived helper
 * thread: the kernel runs a genetlink command inside our sendmsg(), and
 * CONNECT / DISCONNECT may wait on the very sockets the reactor serves, so
 * that call must never block the reactor.  Results come back to the
 * reactor by message. */
#ifndef NBD_KDEV_H
#define NBD_KDEV_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway/base/reactor.h"
#include "nbd/nbd.h"

struct nbd_kdev;

/* How the device is attached: netlink (Linux 4.12+: reattach after a
 * restart), the ioctl interface of older kernels (nbd/kdev_ioctl.h), or
 * auto: netlink when the kernel has the family, ioctl otherwise.  The
 * values are those of the configuration keys. */
enum nbd_kdev_iface { NBD_IFACE_AUTO, NBD_IFACE_NETLINK, NBD_IFACE_IOCTL };

/* "auto", "netlink", "ioctl"; "?" past the last (config enum tables). */
const char *nbd_kdev_iface_name(int iface);

/* The interface attach uses for want, given whether the kernel has the
 * netlink family; -ENODEV when netlink is asked for and absent. */
int nbd_kdev_choose(enum nbd_kdev_iface want, bool family_present);

struct nbd_kdev_opts {
	int index; /* N of /dev/nbdN, or -1: reuse this export's device or let the kernel pick */
	unsigned connections; /* sockets, >= 1 (clamped to 1 without multi-conn) */
	unsigned dead_conn_timeout_s; /* how long the kernel holds I/O for a restart */
	const char *backend_id; /* NULL: "nvmf-gateway:<export name>" */
	/* Another id taken as this export's too: that of a device an older
	 * gateway attached (a reattach then keeps it, as RECONFIGURE must
	 * name the device's own).  NULL: none. */
	const char *legacy_backend_id;
	const char *genl_family; /* NULL: "nbd"; tests name a missing one */
	enum nbd_kdev_iface iface;
	const char *dev_dir, *sysblock; /* NULL: /dev, /sys/block; for tests */
};

/* Runs on r once: d and the device index, or d NULL and -errno (already
 * logged in one line). */
typedef void (*nbd_kdev_attached_fn)(void *arg, struct nbd_kdev *d, int index_or_err);

/* From r's thread.  Starts the connections on r, then connects (or
 * reconfigures the device this export already owns) off the reactor.
 * -errno when nothing was started (cb is not called); 0 otherwise. */
int nbd_kdev_attach(struct reactor *r, struct nbd_export *e, const struct nbd_kdev_opts *o,
		    nbd_kdev_attached_fn cb, void *arg);

/* From r's thread, on an attached device: flushes the device, sends
 * DISCONNECT (the kernel answers its queued I/O and closes the sockets),
 * waits for every connection to drain and close, then runs done(arg) on r
 * and frees d. */
void nbd_kdev_detach(struct nbd_kdev *d, void (*done)(void *arg), void *arg);

/* From r's thread (reactor 0), after the export's volume grew: the device
 * is resized live (NBD_CMD_RECONFIGURE with NBD_ATTR_SIZE_BYTES) on the
 * helper thread, never on a thread that answers the device's I/O.  Logged
 * with its result; nothing to do when the kernel has the size already. */
void nbd_kdev_resize(struct nbd_kdev *d);
int nbd_kdev_index(const struct nbd_kdev *d);
/* The last live resize was accepted by the kernel but the device kept its
 * old size (a kernel that ignores the size in RECONFIGURE): it serves at
 * that size until re-added. */
bool nbd_kdev_resize_ignored(const struct nbd_kdev *d);
/* The interface in use (netlink or ioctl) once attached. */
enum nbd_kdev_iface nbd_kdev_interface(const struct nbd_kdev *d);
/* True when attach found this export's device and reconfigured it. */
bool nbd_kdev_reattached(const struct nbd_kdev *d);

/* Below: the pieces of the above that need no kernel module, for tests. */
struct nl_msg;
struct nlmsghdr;

struct nbd_kdev_req {
	uint8_t cmd; /* NBD_CMD_CONNECT, _RECONFIGURE, _DISCONNECT, _STATUS */
	int index; /* -1: no NBD_ATTR_INDEX */
	uint64_t size, block_size; /* 0: omitted */
	uint64_t server_flags; /* CONNECT only */
	uint64_t client_flags; /* CONNECT / RECONFIGURE */
	uint64_t dead_conn_timeout_s; /* CONNECT / RECONFIGURE; 0: omitted */
	uint64_t timeout_s; /* NBD_ATTR_TIMEOUT, the request timeout, if set_timeout */
	bool set_timeout;
	const char *backend; /* NULL: omitted */
	const int *fds;
	unsigned nr_fds;
};

/* The kernel's request timeout (NBD_ATTR_TIMEOUT, NBD_SET_TIMEOUT).  With
 * one connection it is set to 0, explicitly (the kernel keeps a device's
 * last value across uses): a request the gateway holds is then only logged
 * as stuck every 30 s, never resent, and once the gateway has restarted
 * (a fresh socket, RECONFIGURE) the requests of the dead socket are sent
 * again at their next 30 s tick (Linux nbd_xmit_timeout; kernels before
 * about 5.2 shut the connection down instead, as they always did).  With
 * several connections there is no such setting: past the timeout the
 * kernel closes the request's socket and resends it on another while the
 * gateway may still hold the first (a write could land twice, the older
 * after a newer), and once all are closed the device fails its I/O after
 * dead_conn_timeout; yet the same timeout is the only thing that resends
 * the requests of a crashed gateway's sockets, so a long one would hold
 * them that long.  Several connections keep the kernel's default (30 s),
 * and the attach says so (README "Kernel NBD device"). */

/* The CONNECT (reconfigure false) or RECONFIGURE with fresh sockets of an
 * attach, for a device of kernel_conns connections (at a reconfigure the
 * kernel keeps the count it was connected with, whatever nr_fds is): the
 * request timeout 0 with one, the kernel's default 30 s, said outright,
 * with several (a device keeps its last user's). */
struct nbd_kdev_req nbd_kdev_attach_req(bool reconfigure, int index, uint64_t size,
				       uint32_t block_size, uint64_t server_flags,
				       unsigned dead_conn_timeout_s, const char *backend,
				       const int *fds, unsigned nr_fds, unsigned kernel_conns);
/* The connections the kernel's device N has (its sysfs mq/ queues, one per
 * connection), or 0 when that cannot be read. */
unsigned nbd_kdev_sysfs_conns(const char *sysblock, int index);

/* The live resize of device index to size bytes (nbd_kdev_resize): a
 * RECONFIGURE with the size, the block size and the backend, no sockets. */
struct nbd_kdev_req nbd_kdev_resize_req(int index, uint64_t size, uint32_t block_size,
				       const char *backend);
/* The request as a generic netlink message of family id `family`. */
int nbd_kdev_msg_build(int family, const struct nbd_kdev_req *req, struct nl_msg **out);

struct nbd_kdev_devstat {
	int index;
	bool connected;
};

/* NBD_CMD_STATUS reply -> up to max devices in devs; returns how many, or
 * -EINVAL on a malformed reply. */
int nbd_kdev_parse_status(struct nlmsghdr *nlh, struct nbd_kdev_devstat *devs, unsigned max);
/* NBD_CMD_CONNECT reply -> the device index, or -EINVAL. */
int nbd_kdev_parse_connect_reply(struct nlmsghdr *nlh);

/* Whether a sysfs "backend" file's text names backend_id. */
bool nbd_kdev_backend_matches(const char *sysfs_text, const char *backend_id);


/* SYSBLOCK/nbdN/size in bytes (sysfs counts 512-byte sectors): 0 or -errno. */
int nbd_kdev_sysfs_size(const char *sysblock, int index, uint64_t *bytes);
/* After a live resize: 0 once the device has want bytes (read up to tries
 * times, wait_ms apart), -EOPNOTSUPP if it kept another size (*have), or
 * the read's -errno. */
int nbd_kdev_resize_verify(const char *sysblock, int index, uint64_t want, uint64_t *have,
			   unsigned tries, unsigned wait_ms);
/* Where attach goes, from STATUS and each connected device's
 * SYSBLOCK/nbdN/backend: the index to reconfigure (*reconfigure = true;
 * *legacy when the device names legacy_id, which may be NULL), the index
 * (or -1: kernel's choice) to connect, or -EBUSY when want_index is
 * connected to another backend. */
int nbd_kdev_plan(const char *sysblock, const struct nbd_kdev_devstat *devs, unsigned n,
		  int want_index, const char *backend_id, const char *legacy_id,
		  bool *reconfigure, bool *legacy);

/* The export's NBD flags narrowed to what the kernel driver understands;
 * *connections drops to 1 when the flags do not allow several. */
uint64_t nbd_kdev_server_flags(uint16_t export_flags, unsigned *connections);

/* The send buffer asked for the gateway's end of a kernel device's pair. */
#define NBD_KDEV_SNDBUF (4 << 20)

/* The socket pair of one connection to the kernel's driver: sv[1] is the
 * kernel's, left at its default; sv[0], the gateway's, gets
 * NBD_KDEV_SNDBUF, past wmem_max where the process has CAP_NET_ADMIN.
 * -errno only if the pair was not made. */
int nbd_kdev_socketpair(int sv[2]);

#endif
