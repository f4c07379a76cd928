/* The kernel NBD attach without the kernel module: the netlink messages as
 * built (parsed back with libnl as the kernel would), the STATUS and
 * CONNECT replies, backend identifier matching over a fake sysfs tree, the
 * choice between CONNECT and RECONFIGURE, and the flags. */
#include "nbd/kdev.h"
#include "unit_skip.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nbd-netlink.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define FAMILY 0x1d

static struct nla_policy policy[NBD_ATTR_MAX + 1] = {
	[NBD_ATTR_INDEX] = { .type = NLA_U32 },
	[NBD_ATTR_SIZE_BYTES] = { .type = NLA_U64 },
	[NBD_ATTR_BLOCK_SIZE_BYTES] = { .type = NLA_U64 },
	[NBD_ATTR_TIMEOUT] = { .type = NLA_U64 },
	[NBD_ATTR_SERVER_FLAGS] = { .type = NLA_U64 },
	[NBD_ATTR_CLIENT_FLAGS] = { .type = NLA_U64 },
	[NBD_ATTR_SOCKETS] = { .type = NLA_NESTED },
	[NBD_ATTR_DEAD_CONN_TIMEOUT] = { .type = NLA_U64 },
	[NBD_ATTR_DEVICE_LIST] = { .type = NLA_NESTED },
	[NBD_ATTR_BACKEND_IDENTIFIER] = { .type = NLA_STRING },
};

static struct nlmsghdr *parse(struct nl_msg *msg, struct nlattr **tb, uint8_t cmd)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct genlmsghdr *g = genlmsg_hdr(nlh);

	ck_assert_int_eq(nlh->nlmsg_type, FAMILY);
	ck_assert_int_eq(g->cmd, cmd);
	ck_assert_int_eq(g->version, NBD_GENL_VERSION);
	ck_assert_int_eq(genlmsg_parse(nlh, 0, tb, NBD_ATTR_MAX, policy), 0);
	return nlh;
}

START_TEST(connect_message_carries_everything)
{
	static const int fds[] = { 7, 9, 11 };
	struct nbd_kdev_req req = {
		.cmd = NBD_CMD_CONNECT,
		.index = 3,
		.size = 256ull << 20,
		.block_size = 4096,
		.server_flags = 0x16d,
		.client_flags = 0,
		.dead_conn_timeout_s = 120,
		.backend = "nvmf-gateway:vm101-disk0",
		.fds = fds,
		.nr_fds = 3,
	};
	struct nlattr *tb[NBD_ATTR_MAX + 1], *item, *stb[NBD_SOCK_MAX + 1];
	struct nl_msg *msg;
	unsigned n = 0;
	int rem;

	ck_assert_int_eq(nbd_kdev_msg_build(FAMILY, &req, &msg), 0);
	parse(msg, tb, NBD_CMD_CONNECT);
	ck_assert_ptr_nonnull(tb[NBD_ATTR_INDEX]);
	ck_assert_uint_eq(nla_get_u32(tb[NBD_ATTR_INDEX]), 3);
	ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_SIZE_BYTES]), 256ull << 20);
	ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_BLOCK_SIZE_BYTES]), 4096);
	ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_SERVER_FLAGS]), 0x16d);
	ck_assert_ptr_nonnull(tb[NBD_ATTR_CLIENT_FLAGS]);
	/* Never destroy-on-disconnect: the device must survive a crash. */
	ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_CLIENT_FLAGS]), 0);
	ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_DEAD_CONN_TIMEOUT]), 120);
	ck_assert_str_eq(nla_get_string(tb[NBD_ATTR_BACKEND_IDENTIFIER]),
			 "nvmf-gateway:vm101-disk0");
	ck_assert_ptr_null(tb[NBD_ATTR_TIMEOUT]);
	ck_assert_ptr_nonnull(tb[NBD_ATTR_SOCKETS]);
	nla_for_each_nested(item, tb[NBD_ATTR_SOCKETS], rem) {
		ck_assert_int_eq(nla_type(item), NBD_SOCK_ITEM);
		ck_assert_int_eq(nla_parse_nested(stb, NBD_SOCK_MAX, item, NULL), 0);
		ck_assert_ptr_nonnull(stb[NBD_SOCK_FD]);
		ck_assert_uint_lt(n, 3);
		ck_assert_uint_eq(nla_get_u32(stb[NBD_SOCK_FD]), (uint32_t)fds[n]);
		n++;
	}
	ck_assert_uint_eq(n, 3);
	nlmsg_free(msg);
}
END_TEST

START_TEST(auto_connect_omits_index)
{
	static const int fd = 5;
	struct nbd_kdev_req req = { .cmd = NBD_CMD_CONNECT, .index = -1, .size = 1 << 20,
				    .block_size = 512, .fds = &fd, .nr_fds = 1 };
	struct nlattr *tb[NBD_ATTR_MAX + 1];
	struct nl_msg *msg;

	ck_assert_int_eq(nbd_kdev_msg_build(FAMILY, &req, &msg), 0);
	parse(msg, tb, NBD_CMD_CONNECT);
	ck_assert_ptr_null(tb[NBD_ATTR_INDEX]);
	ck_assert_ptr_null(tb[NBD_ATTR_BACKEND_IDENTIFIER]);
	ck_assert_ptr_null(tb[NBD_ATTR_DEAD_CONN_TIMEOUT]);
	ck_assert_ptr_nonnull(tb[NBD_ATTR_SOCKETS]);
	nlmsg_free(msg);
}
END_TEST

START_TEST(reconfigure_and_disconnect_messages)
{
	static const int fds[] = { 4, 6 };
	struct nbd_kdev_req rc = { .cmd = NBD_CMD_RECONFIGURE, .index = 0, .size = 1 << 20,
				   .block_size = 512, .server_flags = 0x3,
				   .dead_conn_timeout_s = 60, .backend = "b", .fds = fds,
				   .nr_fds = 2 };
	struct nbd_kdev_req dc = { .cmd = NBD_CMD_DISCONNECT, .index = 12 };
	struct nlattr *tb[NBD_ATTR_MAX + 1];
	struct nl_msg *msg;

	ck_assert_int_eq(nbd_kdev_msg_build(FAMILY, &rc, &msg), 0);
	parse(msg, tb, NBD_CMD_RECONFIGURE);
	/* Index 0 is a device, not "absent". */
	ck_assert_ptr_nonnull(tb[NBD_ATTR_INDEX]);
	ck_assert_uint_eq(nla_get_u32(tb[NBD_ATTR_INDEX]), 0);
	/* The kernel refuses a reconfigure without the backend it knows. */
	ck_assert_str_eq(nla_get_string(tb[NBD_ATTR_BACKEND_IDENTIFIER]), "b");
	/* Server flags cannot change on reconfigure: not sent. */
	ck_assert_ptr_null(tb[NBD_ATTR_SERVER_FLAGS]);
	ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_CLIENT_FLAGS]), 0);
	ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_DEAD_CONN_TIMEOUT]), 60);
	ck_assert_ptr_nonnull(tb[NBD_ATTR_SOCKETS]);
	nlmsg_free(msg);

	ck_assert_int_eq(nbd_kdev_msg_build(FAMILY, &dc, &msg), 0);
	parse(msg, tb, NBD_CMD_DISCONNECT);
	ck_assert_uint_eq(nla_get_u32(tb[NBD_ATTR_INDEX]), 12);
	for (int a = NBD_ATTR_SIZE_BYTES; a <= NBD_ATTR_MAX; a++)
		ck_assert_msg(!tb[a], "attribute %d in DISCONNECT", a);
	nlmsg_free(msg);
}
END_TEST

START_TEST(resize_message)
{
	struct nbd_kdev_req rq = nbd_kdev_resize_req(3, 80ull << 20, 4096, "nvmf-gateway:e1");
	struct nlattr *tb[NBD_ATTR_MAX + 1];
	struct nl_msg *msg;

	ck_assert_int_eq(nbd_kdev_msg_build(FAMILY, &rq, &msg), 0);
	parse(msg, tb, NBD_CMD_RECONFIGURE);
	ck_assert_uint_eq(nla_get_u32(tb[NBD_ATTR_INDEX]), 3);
	ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_SIZE_BYTES]), 80ull << 20);
	ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_BLOCK_SIZE_BYTES]), 4096);
	/* Without it the kernel refuses: "backend image doesn't match". */
	ck_assert_ptr_nonnull(tb[NBD_ATTR_BACKEND_IDENTIFIER]);
	ck_assert_str_eq(nla_get_string(tb[NBD_ATTR_BACKEND_IDENTIFIER]), "nvmf-gateway:e1");
	/* A resize keeps the connections and the timeout the attach set. */
	ck_assert_ptr_null(tb[NBD_ATTR_SOCKETS]);
	ck_assert_ptr_null(tb[NBD_ATTR_SERVER_FLAGS]);
	ck_assert_ptr_null(tb[NBD_ATTR_DEAD_CONN_TIMEOUT]);
	nlmsg_free(msg);
}
END_TEST

/* The request timeout (nbd/kdev.h), said outright at a connect and at a
 * reconfigure (a device keeps its last user's): 0 with one connection; the
 * kernel's default 30 s with several (a long one would hold a crashed
 * gateway's requests that long), also when a reconfigure hands one socket
 * to a device the kernel keeps several for (an older gateway attached it
 * so): 0 there would not stop the kernel closing its one live socket.  A
 * resize leaves it alone. */
START_TEST(attach_request_timeout)
{
	static const int fds[2] = { 7, 8 };
	for (int reconf = 0; reconf <= 1; reconf++) {
		for (unsigned n = 1; n <= 2; n++) {
			struct nbd_kdev_req rq = nbd_kdev_attach_req(
				reconf, 4, 1ull << 30, 512, 0x16d, 120, "nvmf-gateway:e1", fds, n, n);
			struct nlattr *tb[NBD_ATTR_MAX + 1];
			struct nl_msg *msg;

			ck_assert_int_eq(nbd_kdev_msg_build(FAMILY, &rq, &msg), 0);
			parse(msg, tb, reconf ? NBD_CMD_RECONFIGURE : NBD_CMD_CONNECT);
			ck_assert_ptr_nonnull(tb[NBD_ATTR_TIMEOUT]);
			ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_TIMEOUT]), n == 1 ? 0 : 30);
			ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_DEAD_CONN_TIMEOUT]), 120);
			ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_CLIENT_FLAGS]), 0);
			ck_assert_ptr_nonnull(tb[NBD_ATTR_SOCKETS]);
			ck_assert_str_eq(nla_get_string(tb[NBD_ATTR_BACKEND_IDENTIFIER]),
					 "nvmf-gateway:e1");
			if (!reconf)
				ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_SERVER_FLAGS]), 0x16d);
			nlmsg_free(msg);
		}
	}
	struct nlattr *tb[NBD_ATTR_MAX + 1];
	struct nl_msg *msg;
	struct nbd_kdev_req rq = nbd_kdev_attach_req(true, 4, 1ull << 30, 512, 0x16d, 120,
						     "nvmf-gateway:e1", fds, 1, 4);
	ck_assert_int_eq(nbd_kdev_msg_build(FAMILY, &rq, &msg), 0);
	parse(msg, tb, NBD_CMD_RECONFIGURE);
	ck_assert_uint_eq(nla_get_u64(tb[NBD_ATTR_TIMEOUT]), 30);
	nlmsg_free(msg);
	struct nbd_kdev_req rz = nbd_kdev_resize_req(4, 2ull << 30, 512, "nvmf-gateway:e1");
	ck_assert_int_eq(nbd_kdev_msg_build(FAMILY, &rz, &msg), 0);
	parse(msg, tb, NBD_CMD_RECONFIGURE);
	ck_assert_ptr_null(tb[NBD_ATTR_TIMEOUT]);
	nlmsg_free(msg);
}
END_TEST

/* A reply as the kernel builds it: a device list of (index, connected). */
static struct nl_msg *status_reply(const int *idx, const int *conn, unsigned n, bool wrap)
{
	struct nl_msg *msg = nlmsg_alloc();
	struct nlattr *list, *item;

	ck_assert_ptr_nonnull(genlmsg_put(msg, 0, 0, FAMILY, 0, 0, NBD_CMD_STATUS, 1));
	if (!wrap)
		return msg;
	list = nla_nest_start(msg, NBD_ATTR_DEVICE_LIST);
	for (unsigned i = 0; i < n; i++) {
		item = nla_nest_start(msg, NBD_DEVICE_ITEM);
		if (idx[i] >= 0)
			nla_put_u32(msg, NBD_DEVICE_INDEX, (uint32_t)idx[i]);
		nla_put_u8(msg, NBD_DEVICE_CONNECTED, (uint8_t)conn[i]);
		nla_nest_end(msg, item);
	}
	/* The kernel sends an empty list when it has no device. */
	nla_nest_end_keep_empty(msg, list);
	return msg;
}

START_TEST(status_reply_parsed)
{
	static const int idx[] = { 0, 1, 15, 4000 }, conn[] = { 0, 1, 1, 0 };
	struct nbd_kdev_devstat devs[8];
	struct nl_msg *msg = status_reply(idx, conn, 4, true);

	ck_assert_int_eq(nbd_kdev_parse_status(nlmsg_hdr(msg), devs, 8), 4);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(devs[i].index, idx[i]);
		ck_assert_int_eq(devs[i].connected, conn[i]);
	}
	/* A short buffer keeps the first ones. */
	ck_assert_int_eq(nbd_kdev_parse_status(nlmsg_hdr(msg), devs, 2), 2);
	ck_assert_int_eq(devs[1].index, 1);
	nlmsg_free(msg);

	msg = status_reply(NULL, NULL, 0, true);
	ck_assert_int_eq(nbd_kdev_parse_status(nlmsg_hdr(msg), devs, 8), 0);
	nlmsg_free(msg);
}
END_TEST

START_TEST(status_reply_malformed)
{
	static const int idx[] = { 2, -1 }, conn[] = { 1, 1 };
	struct nbd_kdev_devstat devs[8];
	struct nl_msg *msg = status_reply(NULL, NULL, 0, false);

	/* No device list at all. */
	ck_assert_int_eq(nbd_kdev_parse_status(nlmsg_hdr(msg), devs, 8), -EINVAL);
	nlmsg_free(msg);
	/* An item without an index. */
	msg = status_reply(idx, conn, 2, true);
	ck_assert_int_eq(nbd_kdev_parse_status(nlmsg_hdr(msg), devs, 8), -EINVAL);
	nlmsg_free(msg);
}
END_TEST

START_TEST(connect_reply_index)
{
	struct nl_msg *msg = nlmsg_alloc();

	genlmsg_put(msg, 0, 0, FAMILY, 0, 0, NBD_CMD_CONNECT, 1);
	ck_assert_int_eq(nbd_kdev_parse_connect_reply(nlmsg_hdr(msg)), -EINVAL);
	nla_put_u32(msg, NBD_ATTR_INDEX, 7);
	ck_assert_int_eq(nbd_kdev_parse_connect_reply(nlmsg_hdr(msg)), 7);
	nlmsg_free(msg);
}
END_TEST

START_TEST(backend_matching)
{
	ck_assert(nbd_kdev_backend_matches("nvmf-gateway:a\n", "nvmf-gateway:a"));
	ck_assert(nbd_kdev_backend_matches("nvmf-gateway:a", "nvmf-gateway:a"));
	ck_assert(!nbd_kdev_backend_matches("nvmf-gateway:ab\n", "nvmf-gateway:a"));
	ck_assert(!nbd_kdev_backend_matches("nvmf-gateway:a\n", "nvmf-gateway:ab"));
	ck_assert(!nbd_kdev_backend_matches("nvmf-gateway:a\n\n", "nvmf-gateway:a"));
	ck_assert(!nbd_kdev_backend_matches("xnvmf-gateway:a\n", "nvmf-gateway:a"));
	ck_assert(!nbd_kdev_backend_matches("\n", ""));
	ck_assert(!nbd_kdev_backend_matches("", ""));
}
END_TEST

/* A fake /sys/block with a backend file per listed device. */
static char sysblock[64];

static void fake_dev(int index, const char *backend)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/nbd%d", sysblock, index);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	if (!backend)
		return;
	snprintf(path, sizeof(path), "%s/nbd%d/backend", sysblock, index);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%s\n", backend);
	fclose(f);
}

static void sysfs_setup(void)
{
	strcpy(sysblock, "/tmp/test_nbd_kdev.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(sysblock));
	fake_dev(0, NULL); /* connected by something without a backend */
	fake_dev(1, "nvmf-gateway:other");
	fake_dev(2, "nvmf-gateway:mine");
	fake_dev(3, "nvmf-gateway:stale"); /* not connected: its file is a leftover */
	fake_dev(4, NULL);
}

static void sysfs_teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sysblock);
	ck_assert_int_eq(system(cmd), 0);
}


static void fake_size(int index, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/nbd%d/size", sysblock, index);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* After a live resize the device's size is read back from sysfs: a
 * kernel that ignores the size in RECONFIGURE (success, old size) is told
 * apart from one that applied it. */
START_TEST(resize_verified_in_sysfs)
{
	uint64_t have = 0;

	fake_size(2, "65536\n"); /* 32 MiB in 512-byte sectors */
	ck_assert_int_eq(nbd_kdev_sysfs_size(sysblock, 2, &have), 0);
	ck_assert_uint_eq(have, 32ull << 20);
	ck_assert_int_eq(nbd_kdev_resize_verify(sysblock, 2, 32ull << 20, &have, 3, 1), 0);
	/* Asked for 64 MiB, the device still has 32: not a success. */
	ck_assert_int_eq(nbd_kdev_resize_verify(sysblock, 2, 64ull << 20, &have, 3, 1),
			 -EOPNOTSUPP);
	ck_assert_uint_eq(have, 32ull << 20);
	fake_size(2, "131072\n");
	ck_assert_int_eq(nbd_kdev_resize_verify(sysblock, 2, 64ull << 20, &have, 3, 1), 0);
	/* No size file, or not a number: the read's error, never success. */
	ck_assert_int_eq(nbd_kdev_resize_verify(sysblock, 4, 64ull << 20, &have, 2, 1), -ENOENT);
	fake_size(4, "12x\n");
	ck_assert_int_eq(nbd_kdev_sysfs_size(sysblock, 4, &have), -EINVAL);
	fake_size(4, "");
	ck_assert_int_eq(nbd_kdev_sysfs_size(sysblock, 4, &have), -EINVAL);
}
END_TEST

static const struct nbd_kdev_devstat devs5[] = {
	{ 0, true }, { 1, true }, { 2, true }, { 3, false }, { 4, false },
};

START_TEST(plan_reattaches_own_device)
{
	bool rc, lg;

	/* auto: the export's own connected device is reconfigured. */
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, -1, "nvmf-gateway:mine", NULL, &rc, &lg), 2);
	ck_assert(rc);
	/* The same device named explicitly. */
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, 2, "nvmf-gateway:mine", NULL, &rc, &lg), 2);
	ck_assert(rc);
}
END_TEST

START_TEST(plan_connects_fresh)
{
	bool rc, lg;

	/* No device of ours: auto stays auto, a free index is connected. */
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, -1, "nvmf-gateway:new", NULL, &rc, &lg), -1);
	ck_assert(!rc);
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, 4, "nvmf-gateway:new", NULL, &rc, &lg), 4);
	ck_assert(!rc);
	/* A disconnected device with a matching leftover is not reused. */
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, -1, "nvmf-gateway:stale", NULL, &rc, &lg), -1);
	ck_assert(!rc);
	/* A device the kernel does not have yet (created on connect). */
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, 40, "nvmf-gateway:new", NULL, &rc, &lg), 40);
	ck_assert(!rc);
	/* An empty STATUS. */
	ck_assert_int_eq(nbd_kdev_plan(sysblock, NULL, 0, -1, "nvmf-gateway:mine", NULL, &rc, &lg), -1);
}
END_TEST

START_TEST(plan_refuses_busy)
{
	bool rc, lg;

	/* Another export's device. */
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, 1, "nvmf-gateway:mine", NULL, &rc, &lg), -EBUSY);
	/* Connected by another tool (no backend file). */
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, 0, "nvmf-gateway:new", NULL, &rc, &lg), -EBUSY);
	/* This export is already attached elsewhere. */
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, 4, "nvmf-gateway:mine", NULL, &rc, &lg), -EEXIST);
}
END_TEST

/* A device's connection count, from its sysfs mq/ queues. */
START_TEST(sysfs_conns_counted)
{
	char path[160];

	ck_assert_uint_eq(nbd_kdev_sysfs_conns(sysblock, 2), 0); /* no mq/ */
	snprintf(path, sizeof(path), "%s/nbd2/mq", sysblock);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/nbd2/mq/%d", sysblock, i);
		ck_assert_int_eq(mkdir(path, 0755), 0);
	}
	ck_assert_uint_eq(nbd_kdev_sysfs_conns(sysblock, 2), 4);
}
END_TEST

/* The daemon names a device by export, NSID and subsystem.  After a crash
 * and a file that now points the export at another namespace, the device
 * left by the old one is not this export's (its filesystem's dirty pages
 * would be written to the new namespace); one an older gateway attached
 * under the export's name alone still is, and is reconfigured under that
 * name. */
START_TEST(plan_identity_and_legacy)
{
	bool rc, lg;

	/* nbd2 is "nvmf-gateway:mine": the legacy name. */
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, -1, "nvmf-gateway:mine/1@nqn.a",
				       "nvmf-gateway:mine", &rc, &lg), 2);
	ck_assert(rc && lg);
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, -1, "nvmf-gateway:mine/1@nqn.a", NULL,
				       &rc, &lg), -1);
	ck_assert(!rc && !lg);
	/* nbd0 attached for nsid 1; the export now names nsid 2. */
	char path[128];
	FILE *f;
	snprintf(path, sizeof(path), "%s/nbd0/backend", sysblock);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs("nvmf-gateway:vm/1@nqn.a\n", f);
	fclose(f);
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, -1, "nvmf-gateway:vm/2@nqn.a",
				       "nvmf-gateway:vm", &rc, &lg), -1);
	ck_assert(!rc && !lg);
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, 0, "nvmf-gateway:vm/2@nqn.a",
				       "nvmf-gateway:vm", &rc, &lg), -EBUSY);
	/* The same namespace: its own device, not the legacy path. */
	ck_assert_int_eq(nbd_kdev_plan(sysblock, devs5, 5, -1, "nvmf-gateway:vm/1@nqn.a",
				       "nvmf-gateway:vm", &rc, &lg), 0);
	ck_assert(rc && !lg);
}
END_TEST

START_TEST(server_flags_for_the_kernel)
{
	unsigned conns = 4;
	/* has_flags|flush|fua|trim|write_zeroes|df|multi_conn|cache|fast_zero */
	uint16_t ex = 0x1 | 0x4 | 0x8 | 0x20 | 0x40 | 0x80 | 0x100 | 0x400 | 0x800;

	ck_assert_uint_eq(nbd_kdev_server_flags(ex, &conns), 0x1 | 0x4 | 0x8 | 0x20 | 0x40 | 0x100);
	ck_assert_uint_eq(conns, 4);
	/* Without multi-conn the kernel takes one socket only. */
	ck_assert_uint_eq(nbd_kdev_server_flags(0x2, &conns), 0x3);
	ck_assert_uint_eq(conns, 1);
	conns = 1;
	ck_assert_uint_eq(nbd_kdev_server_flags(0, &conns), 0x1);
	ck_assert_uint_eq(conns, 1);
}
END_TEST

/* The reactor side without the module: the connections start, the helper
 * thread finds no family, the callback runs once with -ENODEV and
 * everything is closed and freed (ASan/LSan check the last part). */
struct attach_result {
	unsigned calls;
	struct nbd_kdev *d;
	int err;
};

static void on_attached(void *arg, struct nbd_kdev *d, int index_or_err)
{
	struct attach_result *res = arg;

	res->calls++;
	res->d = d;
	res->err = index_or_err;
}

/* An attach that can never reach a kernel: its netlink family does not
 * exist.  With a reactor and a 1 MiB RAM volume behind the export. */
static struct nbd_kdev_opts no_family_opts(unsigned connections)
{
	return (struct nbd_kdev_opts){ .index = -1, .connections = connections,
				       .dead_conn_timeout_s = 5, .backend_id = "nvmf-gateway:unit",
				       .genl_family = "nvmf-gw-unit-none",
				       .iface = NBD_IFACE_NETLINK };
}

static void attach_env_init(struct reactor *r, struct nbd_export *e, struct volume **v)
{
	ck_assert_int_eq(reactor_init(r, 0, 64), 0);
	ck_assert_int_eq(vol_mem_create("unit", 1 << 20, 512, VOL_CAP_FLUSH, 1, v), 0);
	e->vol = *v;
}

START_TEST(attach_fails_cleanly_without_the_family)
{
	struct nbd_kdev_opts o = no_family_opts(2);
	struct nbd_export e = { .name = "unit" };
	struct attach_result res = { 0 };
	struct reactor r;
	struct volume *v;

	attach_env_init(&r, &e, &v);
	ck_assert_int_eq(nbd_kdev_attach(&r, &e, &o, on_attached, &res), 0);
	/* Bounded only so that a lost callback fails instead of hanging. */
	for (int i = 0; i < 3000 && !res.calls; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert_uint_eq(res.calls, 1);
	ck_assert_ptr_null(res.d);
	ck_assert_int_eq(res.err, -ENODEV);
	for (int i = 0; i < 10; i++)
		reactor_poll(&r, NSEC_PER_MSEC);
	ck_assert_uint_eq(res.calls, 1);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

/* Two exports attaching "auto" through the ioctl interface at once (the
 * daemon starts its exports together): the device the other one has
 * locked still looks free (size 0, no NBD_DO_IT yet), and the attach went
 * on to fail with "served by another running gateway" (-EBUSY) instead of
 * taking the next device.  The other attach is this test's own lock on
 * nbd0; the fake devices are regular files, so the attach that goes on
 * fails at its first ioctl (-ENOTTY), on nbd1. */
static void touch_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static int attach_ioctl_auto(const char *root)
{
	char dev[256], sys[256];
	struct nbd_kdev_opts o = { .index = -1, .connections = 1, .dead_conn_timeout_s = 5,
				   .iface = NBD_IFACE_IOCTL, .dev_dir = dev, .sysblock = sys };
	struct nbd_export e = { .name = "unit" };
	struct attach_result res = { 0 };
	struct reactor r;
	struct volume *v;

	snprintf(dev, sizeof(dev), "%s/dev", root);
	snprintf(sys, sizeof(sys), "%s/sys", root);
	attach_env_init(&r, &e, &v);
	ck_assert_int_eq(nbd_kdev_attach(&r, &e, &o, on_attached, &res), 0);
	for (int i = 0; i < 3000 && !res.calls; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert_uint_eq(res.calls, 1);
	ck_assert_ptr_null(res.d);
	vol_destroy(v);
	reactor_fini(&r);
	return res.err;
}

static int lock_dev(const char *root, int index)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/run/nbd%d.lock", root, index);
	ck_assert_int_ge(fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644), 0);
	ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
	return fd;
}

START_TEST(ioctl_auto_skips_a_device_being_attached)
{
	char root[] = "/tmp/kdev-auto-XXXXXX", path[512];
	const char *dirs[] = { "dev", "sys", "sys/nbd0", "sys/nbd1", "run" };

	ck_assert_ptr_nonnull(mkdtemp(root));
	for (unsigned i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", root, dirs[i]);
		ck_assert_int_eq(mkdir(path, 0755), 0);
	}
	touch_file(root, "sys/nbd0/size", "0\n");
	touch_file(root, "sys/nbd1/size", "0\n");
	touch_file(root, "dev/nbd0", "");
	touch_file(root, "dev/nbd1", "");
	snprintf(path, sizeof(path), "%s/run", root);
	setenv("NVMF_GATEWAY_RUN_DIR", path, 1);

	int l0 = lock_dev(root, 0);
	int err = attach_ioctl_auto(root);
	ck_assert_msg(err != -EBUSY, "a device being attached by another was not skipped");
	/* It went on to nbd1 (a regular file here: the ioctl fails). */
	ck_assert_int_eq(err, -ENOTTY);
	/* With every device being attached: none is free. */
	int l1 = lock_dev(root, 1);
	ck_assert_int_eq(attach_ioctl_auto(root), -ENODEV);
	close(l1);
	close(l0);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(attach_rejects_bad_options)
{
	struct nbd_kdev_opts o = { .index = -1, .connections = 0 };
	struct nbd_export e = { .name = "unit" };
	struct attach_result res = { 0 };
	struct reactor r;
	struct volume *v;

	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	ck_assert_int_eq(vol_mem_create("unit", 1 << 20, 512, 0, 1, &v), 0);
	e.vol = v;
	ck_assert_int_eq(nbd_kdev_attach(&r, &e, &o, on_attached, &res), -EINVAL);
	o.connections = 65;
	ck_assert_int_eq(nbd_kdev_attach(&r, &e, &o, on_attached, &res), -EINVAL);
	o.connections = 1;
	o.index = -2;
	ck_assert_int_eq(nbd_kdev_attach(&r, &e, &o, on_attached, &res), -EINVAL);
	reactor_poll(&r, NSEC_PER_MSEC);
	ck_assert_uint_eq(res.calls, 0);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

/* 2 * min(bytes, wmem_max): what SO_SNDBUF without the capability gives. */
static int sndbuf_unprivileged(int bytes)
{
	FILE *f = fopen("/proc/sys/net/core/wmem_max", "r");
	int max = 0;

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &max), 1);
	fclose(f);
	return 2 * (bytes < max ? bytes : max);
}

/* The gateway's end of the kernel's socket pair gets NBD_KDEV_SNDBUF: with
 * it, a 1 MiB send is taken whole while nobody reads, where the default
 * (208 KiB) takes a part.  Without CAP_NET_ADMIN, what wmem_max allows.
 * The kernel's end keeps the default (its driver sends with
 * __GFP_MEMALLOC). */
START_TEST(socketpair_send_buffers)
{
	static char buf[1 << 20];
	int sv[2], probe, sz = NBD_KDEV_SNDBUF, got, def;
	socklen_t len = sizeof(got);
	bool privileged;
	ssize_t n;
	size_t back = 0;

	probe = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(probe, 0);
	ck_assert_int_eq(getsockopt(probe, SOL_SOCKET, SO_SNDBUF, &def, &len), 0);
	privileged = setsockopt(probe, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) == 0;
	close(probe);
	ck_assert_int_eq(nbd_kdev_socketpair(sv), 0);
	ck_assert_int_eq(getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &got, &len), 0);
	ck_assert_int_eq(got, privileged ? 2 * NBD_KDEV_SNDBUF : sndbuf_unprivileged(NBD_KDEV_SNDBUF));
	ck_assert_int_eq(getsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &got, &len), 0);
	ck_assert_int_eq(got, def);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(fcntl(sv[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	if (privileged) {
		memset(buf, 0x5a, sizeof(buf));
		n = send(sv[0], buf, sizeof(buf), MSG_DONTWAIT);
		ck_assert_int_eq(n, (ssize_t)sizeof(buf));
		memset(buf, 0, sizeof(buf));
		while (back < sizeof(buf)) {
			n = recv(sv[1], buf + back, sizeof(buf) - back, 0);
			ck_assert_int_gt(n, 0);
			back += (size_t)n;
		}
		ck_assert_int_eq(buf[0], 0x5a);
		ck_assert_int_eq(buf[sizeof(buf) - 1], 0x5a);
	}
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Out of descriptors part way through the pairs of a several-connection
 * attach: the attach fails with EMFILE and closes only what it opened.
 * It once closed fd 0 for every connection after the failing one (their
 * kfd was still calloc's 0). */
START_TEST(attach_out_of_fds_closes_only_its_own)
{
	struct nbd_kdev_opts o = no_family_opts(8);
	struct nbd_export e = { .name = "unit" };
	struct attach_result res = { 0 };
	struct reactor r;
	struct volume *v;
	struct rlimit rl;
	int zero, next;

	attach_env_init(&r, &e, &v);
	/* fd 0 open on something of our own, to see whether it is closed. */
	zero = open("/dev/null", O_RDONLY);
	ck_assert_int_ge(zero, 0);
	ck_assert_int_eq(dup2(zero, 0), 0);
	close(zero);
	next = dup(0);
	ck_assert_int_gt(next, 0);
	close(next);
	/* Room for two pairs and a half: the third pair fails. */
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = (rlim_t)next + 5;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	ck_assert_int_eq(nbd_kdev_attach(&r, &e, &o, on_attached, &res), -EMFILE);
	ck_assert_int_ne(fcntl(0, F_GETFD), -1);
	/* And every descriptor it opened is closed again. */
	next = dup(0);
	ck_assert_int_gt(next, 0);
	ck_assert_int_le(next, (int)rl.rlim_cur - 5);
	close(next);
	reactor_poll(&r, NSEC_PER_MSEC);
	ck_assert_uint_eq(res.calls, 0);
	vol_destroy(v);
	reactor_fini(&r);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("nbd_kdev");
	TCase *tc = tcase_create("messages");

	tcase_add_test(tc, connect_message_carries_everything);
	tcase_add_test(tc, auto_connect_omits_index);
	tcase_add_test(tc, reconfigure_and_disconnect_messages);
	tcase_add_test(tc, resize_message);
	tcase_add_test(tc, attach_request_timeout);
	tcase_add_test(tc, status_reply_parsed);
	tcase_add_test(tc, status_reply_malformed);
	tcase_add_test(tc, connect_reply_index);
	tcase_add_test(tc, backend_matching);
	tcase_add_test(tc, server_flags_for_the_kernel);
	tcase_add_test(tc, socketpair_send_buffers);
	suite_add_tcase(s, tc);
	tc = tcase_create("plan");
	tcase_add_checked_fixture(tc, sysfs_setup, sysfs_teardown);
	tcase_add_test(tc, plan_reattaches_own_device);
	tcase_add_test(tc, plan_connects_fresh);
	tcase_add_test(tc, plan_refuses_busy);
	tcase_add_test(tc, plan_identity_and_legacy);
	tcase_add_test(tc, sysfs_conns_counted);
	tcase_add_test(tc, resize_verified_in_sysfs);
	suite_add_tcase(s, tc);
	tc = tcase_create("reactor");
	tcase_add_test(tc, attach_fails_cleanly_without_the_family);
	tcase_add_test(tc, attach_rejects_bad_options);
	tcase_add_test(tc, ioctl_auto_skips_a_device_being_attached);
	tcase_add_test(tc, attach_out_of_fds_closes_only_its_own);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	unit_need_io_uring();
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

