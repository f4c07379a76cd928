#include "gateway/config.h"
#include "gateway/base/parse.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A loaded file: its temporary path, config_load's status and output. */
struct loaded {
	char path[64];
	int rc;
	struct gw_config *cfg;
	char *errs;
	size_t errs_len;
};

static void write_file(char *path, const void *text, size_t len)
{
	strcpy(path, "/tmp/test_config.XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
}

static void load_path(struct loaded *l)
{
	FILE *errs = open_memstream(&l->errs, &l->errs_len);

	ck_assert_ptr_nonnull(errs);
	l->cfg = NULL;
	l->rc = config_load(l->path, &l->cfg, errs);
	fclose(errs);
}

static void load(struct loaded *l, const char *text)
{
	write_file(l->path, text, strlen(text));
	load_path(l);
}

static void unload(struct loaded *l)
{
	config_free(l->cfg);
	free(l->errs);
	unlink(l->path);
}

static size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* The 1-based number of the Nth (0-based) line holding MARK, or 0. */
static int marked_line(const char *text, const char *mark, int nth)
{
	int line = 1;

	for (const char *p = text; *p; p++) {
		if (strncmp(p, mark, strlen(mark)) == 0 && nth-- == 0)
			return line;
		line += *p == '\n';
	}
	return 0;
}

/* Line number of the Nth error line of L->errs, checking its FILE: prefix. */
static int error_line(const struct loaded *l, int nth, const char **msg)
{
	const char *p = l->errs;

	while (nth-- > 0) {
		p = strchr(p, '\n');
		ck_assert_ptr_nonnull(p);
		p++;
	}
	size_t n = strlen(l->path);
	ck_assert_msg(strncmp(p, l->path, n) == 0 && p[n] == ':',
		      "no file prefix in: %s", p);
	char *end;
	long line = strtol(p + n + 1, &end, 10);
	ck_assert_msg(end[0] == ':' && end[1] == ' ', "no line in: %s", p);
	*msg = end + 2;
	return (int)line;
}

/* ---- a valid file ---- */

static const char full_conf[] =
	"# every key set, none to its default\n"
	"gateway = { reactors = 3; poll_us = 50; control = \"/tmp/gw.sock\";\n"
	"  state_dir = \"/tmp/gw-state\"; log_level = \"debug\";\n"
	"  hostnqn = \"nqn.2014-08.org.nvmexpress:uuid:0f8fa3d6-0b2e-4c2d-9d3b-111111111111\";\n"
	"  hostid = \"0f8fa3d6-0b2e-4c2d-9d3b-111111111111\";\n"
	"  metrics = \"tcp:127.0.0.1:9465\"; };\n"
	"targets = ( {\n"
	"  name = \"array1\"; subnqn = \"nqn.2026-01.com.example:pool1\";\n"
	"  paths = ( { transport = \"rdma\"; traddr = \"192.0.2.10\"; trsvcid = \"4421\";\n"
	"              host_traddr = \"192.0.2.1\"; host_iface = \"eth1\"; tos = 96; },\n"
	"            { transport = \"tcp\"; traddr = \"192.0.2.11\"; trsvcid = 4422; } );\n"
	"  nr_io_queues = 7; queue_size = 256; hdr_digest = true; data_digest = true;\n"
	"  keep_alive_tmo = 0; reconnect_delay = 2; ctrl_loss_tmo = -1;\n"
	"  fast_io_fail_tmo = 5; io_timeout = 60; max_retries = 0;\n"
	"  connect_loss_tmo = 120;\n"
	"  multipath = \"round-robin\"; dhchap_secret = \"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:\";\n"
	"}, {\n"
	"  name = \"lab.box_2\"; subnqn = \"nqn.2026-01.com.example:lab\";\n"
	"  paths = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; } );\n"
	"  multipath = \"queue-depth\";\n"
	"} );\n"
	"exports = ( {\n"
	"  name = \"vm101-disk0\"; target = \"array1\"; nsid = 0xFFFFFFFEL;\n"
	"  nbd = { device = \"/dev/nbd3\"; listen = \"unix:/tmp/vm101.sock\"; connections = 4; };\n"
	"  fuse = true; read_only = true;\n"
	"  qos = { iops = 20000; bandwidth = \"400M\"; };\n"
	"}, {\n"
	"  name = \"e2\"; target = \"lab.box_2\"; nsid = 2;\n"
	"  nbd = { device = \"auto\"; listen = \"tcp:[::1]:10809\"; };\n"
	"  qos = { bandwidth = 1048576; read_iops = 7; write_iops = 8;\n"
	"          read_bandwidth = \"1M\"; write_bandwidth = 2048; };\n"
	"}, {\n"
	"  name = \"e3\"; target = \"lab.box_2\"; nbd = { listen = \"tcp:10810\"; };\n"
	"}, {\n"
	"  name = \"e4\"; target = \"array1\"; fuse = true;\n"
	"} );\n"
	"fuse = { mountpoint = \"/tmp/gw-fuse\"; allow_other = true; uid = 1000; gid = 2000; };\n";

START_TEST(full_file)
{
	struct loaded l;

	load(&l, full_conf);
	ck_assert_msg(l.rc == 0, "rc %d: %s", l.rc, l.errs);
	ck_assert_str_eq(l.errs, "");
	const struct gw_config *c = l.cfg;
	ck_assert_str_eq(c->path, l.path);
	ck_assert_int_eq(c->reactors, 3);
	ck_assert_int_eq(c->poll_us, 50);
	ck_assert_str_eq(c->control, "/tmp/gw.sock");
	ck_assert_str_eq(c->state_dir, "/tmp/gw-state");
	ck_assert_int_eq(c->log_level, LOG_LVL_DEBUG);
	ck_assert_str_eq(c->hostnqn,
			 "nqn.2014-08.org.nvmexpress:uuid:0f8fa3d6-0b2e-4c2d-9d3b-111111111111");
	ck_assert_str_eq(c->hostid, "0f8fa3d6-0b2e-4c2d-9d3b-111111111111");
	ck_assert_int_eq(c->metrics.kind, GW_LISTEN_TCP);
	ck_assert_str_eq(c->metrics.host, "127.0.0.1");
	ck_assert_uint_eq(c->metrics.port, 9465);

	ck_assert_uint_eq(c->nr_targets, 2);
	const struct gw_target *t = &c->targets[0];
	ck_assert_str_eq(t->name, "array1");
	ck_assert_str_eq(t->subnqn, "nqn.2026-01.com.example:pool1");
	ck_assert_uint_eq(t->nr_paths, 2);
	ck_assert_int_eq(t->paths[0].transport, NVMF_TR_RDMA);
	ck_assert_str_eq(t->paths[0].traddr, "192.0.2.10");
	ck_assert_str_eq(t->paths[0].trsvcid, "4421");
	ck_assert_str_eq(t->paths[0].host_traddr, "192.0.2.1");
	ck_assert_str_eq(t->paths[0].host_iface, "eth1");
	ck_assert_int_eq(t->paths[0].tos, 96);
	ck_assert_int_eq(t->paths[1].transport, NVMF_TR_TCP);
	ck_assert_str_eq(t->paths[1].trsvcid, "4422");
	ck_assert_ptr_null(t->paths[1].host_traddr);
	ck_assert_ptr_null(t->paths[1].host_iface);
	ck_assert_int_eq(t->paths[1].tos, -1);
	ck_assert_int_eq(t->nr_io_queues, 7);
	ck_assert_int_eq(t->queue_size, 256);
	ck_assert(t->hdr_digest && t->data_digest);
	ck_assert_int_eq(t->keep_alive_tmo, 0);
	ck_assert_int_eq(t->reconnect_delay, 2);
	ck_assert_int_eq(t->ctrl_loss_tmo, -1);
	ck_assert_int_eq(t->fast_io_fail_tmo, 5);
	ck_assert_int_eq(t->connect_loss_tmo, 120);
	ck_assert_int_eq(t->io_timeout, 60);
	ck_assert_int_eq(t->max_retries, 0);
	ck_assert_int_eq(t->multipath, MP_ROUND_ROBIN);
	ck_assert_str_eq(t->dhchap_secret, "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:");
	ck_assert_ptr_null(t->dhchap_ctrl_secret);
	ck_assert_int_eq(c->targets[1].multipath, MP_QUEUE_DEPTH);

	ck_assert_uint_eq(c->nr_exports, 4);
	const struct gw_export *e = &c->exports[0];
	ck_assert_str_eq(e->name, "vm101-disk0");
	ck_assert_str_eq(e->target_name, "array1");
	ck_assert_ptr_eq(e->target, &c->targets[0]);
	ck_assert_uint_eq(e->nsid, 0xFFFFFFFEu);
	ck_assert(e->has_nbd && e->fuse && e->read_only);
	ck_assert_int_eq(e->nbd.device, 3);
	ck_assert_int_eq(e->nbd.listen.kind, GW_LISTEN_UNIX);
	ck_assert_str_eq(e->nbd.listen.path, "/tmp/vm101.sock");
	ck_assert_str_eq(e->nbd.listen.spec, "unix:/tmp/vm101.sock");
	ck_assert_int_eq(e->nbd.connections, 4);
	ck_assert_uint_eq(e->qos_iops, 20000);
	ck_assert_uint_eq(e->qos_bandwidth, 400u << 20);

	e = &c->exports[1];
	ck_assert_ptr_eq(e->target, &c->targets[1]);
	ck_assert_uint_eq(e->nsid, 2);
	ck_assert_int_eq(e->nbd.device, GW_NBD_AUTO);
	ck_assert_int_eq(e->nbd.listen.kind, GW_LISTEN_TCP);
	ck_assert_str_eq(e->nbd.listen.host, "::1");
	ck_assert_uint_eq(e->nbd.listen.port, 10809);
	ck_assert_uint_eq(e->qos_bandwidth, 1048576);
	ck_assert_uint_eq(e->qos_read_iops, 7);
	ck_assert_uint_eq(e->qos_write_iops, 8);
	ck_assert_uint_eq(e->qos_read_bandwidth, 1 << 20);
	ck_assert_uint_eq(e->qos_write_bandwidth, 2048);
	ck_assert(!e->fuse && !e->read_only);

	e = &c->exports[2];
	ck_assert_int_eq(e->nbd.device, GW_NBD_NONE);
	ck_assert_ptr_null(e->nbd.listen.host);
	ck_assert_uint_eq(e->nbd.listen.port, 10810);
	ck_assert(!c->exports[3].has_nbd && c->exports[3].fuse);

	ck_assert_str_eq(c->fuse.mountpoint, "/tmp/gw-fuse");
	ck_assert(c->fuse.allow_other);
	ck_assert_uint_eq(c->fuse.uid, 1000);
	ck_assert_uint_eq(c->fuse.gid, 2000);
	unload(&l);
}
END_TEST

START_TEST(defaults)
{
	struct loaded l;

	load(&l, "targets = ( { name = \"t\"; subnqn = \"nqn.x\";\n"
		 "  paths = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; } ); } );\n"
		 "exports = ( { name = \"e\"; target = \"t\"; nbd = { device = \"/dev/nbd0\"; }; } );\n");
	ck_assert_msg(l.rc == 0, "rc %d: %s", l.rc, l.errs);
	const struct gw_config *c = l.cfg;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int reactors = cpus < 1 ? 1 : cpus > 256 ? 256 : (int)cpus;
	ck_assert_int_eq(c->reactors, reactors);
	ck_assert_int_eq(c->poll_us, 0);
	char control[108];
	config_default_control(control, sizeof(control));
	ck_assert_str_eq(c->control, control);
	if (geteuid() == 0)
		ck_assert_str_eq(c->control, "/run/nvmf-gateway/gateway.control");
	ck_assert_str_eq(c->state_dir, "/var/lib/nvmf-gateway");
	ck_assert_int_eq(c->log_level, LOG_LVL_NOTICE);
	ck_assert_ptr_null(c->hostnqn);
	ck_assert_ptr_null(c->hostid);
	ck_assert_int_eq(c->metrics.kind, GW_LISTEN_NONE);

	const struct gw_target *t = &c->targets[0];
	ck_assert_str_eq(t->paths[0].trsvcid, "4420");
	ck_assert_int_eq(t->paths[0].tos, -1);
	ck_assert_int_eq(t->nr_io_queues, reactors);
	ck_assert_int_eq(t->queue_size, 128);
	ck_assert(!t->hdr_digest && !t->data_digest);
	ck_assert_int_eq(t->keep_alive_tmo, 5);
	ck_assert_int_eq(t->reconnect_delay, 10);
	ck_assert_int_eq(t->ctrl_loss_tmo, 600);
	ck_assert_int_eq(t->fast_io_fail_tmo, -1);
	ck_assert_int_eq(t->connect_loss_tmo, -1); /* a target not up yet is waited for */
	ck_assert_int_eq(t->io_timeout, 30);
	ck_assert_int_eq(t->max_retries, 5);
	ck_assert_int_eq(t->multipath, MP_FAILOVER);
	ck_assert_ptr_null(t->dhchap_secret);

	const struct gw_export *e = &c->exports[0];
	ck_assert_uint_eq(e->nsid, 1);
	ck_assert(e->has_nbd && !e->fuse && !e->read_only);
	ck_assert_int_eq(e->nbd.device, 0);
	ck_assert_int_eq(e->nbd.listen.kind, GW_LISTEN_NONE);
	ck_assert_int_eq(e->nbd.connections, 1); /* one unless told: nbd/kdev.h */
	ck_assert_uint_eq(e->qos_iops, 0);
	ck_assert_uint_eq(e->qos_bandwidth, 0);

	ck_assert_str_eq(c->fuse.mountpoint, "/run/nvmf-gateway/fuse");
	ck_assert(!c->fuse.allow_other);
	ck_assert_uint_eq(c->fuse.uid, 0);
	ck_assert_uint_eq(c->fuse.gid, 0);
	unload(&l);
}
END_TEST

/* The reactor count given in the file, wherever it appears, is the default
 * of the per-target I/O queues; a kernel device has one connection unless
 * told (nbd/kdev.h: the kernel's request timeout). */
START_TEST(reactors_default_follows_file)
{
	struct loaded l;

	load(&l, "exports = ( { name = \"e\"; target = \"t\"; nbd = { device = \"auto\"; }; } );\n"
		 "targets = ( { name = \"t\"; subnqn = \"nqn.x\";\n"
		 "  paths = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; } ); } );\n"
		 "gateway = { reactors = 5; };\n");
	ck_assert_msg(l.rc == 0, "rc %d: %s", l.rc, l.errs);
	ck_assert_int_eq(l.cfg->targets[0].nr_io_queues, 5);
	ck_assert_int_eq(l.cfg->exports[0].nbd.connections, 1);
	unload(&l);
}
END_TEST

START_TEST(empty_file)
{
	struct loaded l;
	char *out;
	size_t len;

	load(&l, "# nothing yet\n");
	ck_assert_int_eq(l.rc, 0);
	FILE *f = open_memstream(&out, &len);
	config_summary(l.cfg, f);
	fclose(f);
	ck_assert_int_eq(count_lines(out), 1);
	ck_assert_ptr_nonnull(strstr(out, ": OK: 0 targets (0 paths), 0 exports (0 nbd, 0 fuse)"));
	free(out);
	unload(&l);
}
END_TEST

START_TEST(summary)
{
	struct loaded l;
	char *out, *want;
	size_t len;

	load(&l, full_conf);
	ck_assert_int_eq(l.rc, 0);
	FILE *f = open_memstream(&out, &len);
	config_summary(l.cfg, f);
	fclose(f);
	ck_assert_int_ge(asprintf(&want, "%s: OK: 2 targets (3 paths), 4 exports (3 nbd, 2 fuse)\n",
				  l.path), 0);
	ck_assert_str_eq(out, want);
	free(want);
	free(out);
	unload(&l);
}
END_TEST

/* ---- one error class per case ---- */

/* Every line marked "#!" must get exactly one error, and no other line
 * any; MSG is part of the first one. */
struct bad_case {
	const char *text;
	const char *msg;
};

#define PATH_TCP "paths = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; } );"
/* A valid target t1 (3 lines) and export e1 (2 lines + EXTRA) to put one
 * bad line into. */
#define TARGETS(extra)                                                   \
	"targets = ( { name = \"t1\"; subnqn = \"nqn.2026-01.org.example:t1\";\n" \
	"  " PATH_TCP "\n" extra "} );\n"
#define EXPORTS(extra)                                                   \
	"exports = ( { name = \"e1\"; target = \"t1\"; fuse = true;\n" extra "} );\n"

static const struct bad_case bad_cases[] = {
	/* unknown keys */
	{ "foo = 1; #!\n", "unknown top-level key 'foo'" },
	{ "gateway = {\n  reactorz = 2; #!\n};\n", "unknown key 'reactorz' in gateway" },
	{ TARGETS("  qeue_size = 2; #!\n"), "unknown key 'qeue_size' in targets[0]" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
	  "  paths = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; },\n"
	  "            { transport = \"tcp\"; traddr = \"127.0.0.2\";\n"
	  "              foo = 1; } ); } ); #!\n",
	  "unknown key 'foo' in targets[0].paths[1]" },
	{ TARGETS("") EXPORTS("  nbd = { device = \"auto\";\n    dev = \"x\"; }; #!\n"),
	  "unknown key 'dev' in exports[0].nbd" },
	{ TARGETS("") EXPORTS("  qos = { iops = 1; bw = 2; }; #!\n"),
	  "unknown key 'bw' in exports[0].qos" },
	{ "fuse = { mount = \"/x\"; }; #!\n", "unknown key 'mount' in fuse" },
	/* types */
	{ TARGETS("  queue_size = \"128\"; #!\n"),
	  "targets[0].queue_size: expected an integer, got a string" },
	{ TARGETS("  queue_size = 12.5; #!\n"),
	  "targets[0].queue_size: expected an integer, got a float" },
	{ TARGETS("  hdr_digest = 1; #!\n"),
	  "targets[0].hdr_digest: expected a boolean, got an integer" },
	{ "targets = ( { name = 7; #!\n subnqn = \"nqn.x\"; " PATH_TCP " } );\n",
	  "targets[0].name: expected a string, got an integer" },
	{ "targets = ( { name = \"t\"; subnqn = \"nqn.x\";\n"
	  "  paths = { transport = \"tcp\"; traddr = \"::1\"; }; } ); #!\n",
	  "targets[0].paths: expected a list, got a group" },
	{ "targets = ( 1 ); #!\n", "targets[0]: expected a group, got an integer" },
	{ "targets = { }; #!\n", "targets: expected a list, got a group" },
	{ "gateway = ( ); #!\n", "gateway: expected a group, got a list" },
	{ TARGETS("  multipath = [1, 2]; #!\n"),
	  "targets[0].multipath: expected a string, got an array" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
	  "  paths = ( { transport = \"tcp\"; traddr = \"::1\"; trsvcid = true; } ); } ); #!\n",
	  "expected a string or an integer, got a boolean" },
	{ "gateway = { metrics = \"http://x\"; }; #!\n",
	  "gateway.metrics: invalid value \"http://x\"" },
	{ "gateway = { metrics = 9465; }; #!\n",
	  "gateway.metrics: expected a string, got an integer" },
	{ TARGETS("") EXPORTS("  qos = { write_bandwidth = \"9Q\"; }; #!\n"),
	  "exports[0].qos.write_bandwidth: invalid value \"9Q\"" },
	{ TARGETS("") EXPORTS("  qos = { read_iops = -1; }; #!\n"),
	  "exports[0].qos.read_iops = -1 is out of range" },
	{ TARGETS("") EXPORTS("  qos = { bandwidth = 1.5; }; #!\n"),
	  "exports[0].qos.bandwidth: expected a string or an integer, got a float" },
	/* ranges */
	{ "gateway = { reactors = 0; }; #!\n", "gateway.reactors = 0 is out of range 1..256" },
	{ "gateway = { reactors = 257; }; #!\n", "out of range 1..256" },
	{ "gateway = { poll_us = 1001; }; #!\n", "gateway.poll_us = 1001 is out of range 0..1000" },
	{ TARGETS("  queue_size = 4096; #!\n"), "targets[0].queue_size = 4096 is out of range 2..1024" },
	{ TARGETS("  nr_io_queues = 129; #!\n"), "out of range 1..128" },
	{ TARGETS("  keep_alive_tmo = -1; #!\n"), "out of range 0..3600" },
	{ TARGETS("  reconnect_delay = 0; #!\n"), "out of range 1..3600" },
	{ TARGETS("  ctrl_loss_tmo = -2; #!\n"), "out of range -1..86400" },
	{ TARGETS("  fast_io_fail_tmo = 86401; #!\n"), "out of range -1..86400" },
	{ TARGETS("  connect_loss_tmo = -2; #!\n"), "out of range -1..86400" },
	{ TARGETS("  io_timeout = 0; #!\n"), "out of range 1..3600" },
	{ TARGETS("  max_retries = 101; #!\n"), "out of range 0..100" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
	  "  paths = ( { transport = \"tcp\"; traddr = \"::1\"; tos = 256; } ); } ); #!\n",
	  "targets[0].paths[0].tos = 256 is out of range -1..255" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
	  "  paths = ( { transport = \"tcp\"; traddr = \"::1\"; trsvcid = 70000; } ); } ); #!\n",
	  "trsvcid = 70000 is out of range 1..65535" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
	  "  paths = ( { transport = \"tcp\"; traddr = \"::1\"; trsvcid = \"44x\"; } ); } ); #!\n",
	  "invalid value \"44x\": expected a port 1..65535" },
	{ TARGETS("") EXPORTS("  nsid = 0; #!\n"), "exports[0].nsid = 0 is out of range 1..4294967294" },
	{ TARGETS("") EXPORTS("  nsid = 0xFFFFFFFFL; #!\n"), "out of range 1..4294967294" },
	{ TARGETS("") EXPORTS("  nbd = { device = \"auto\"; connections = 65; }; #!\n"),
	  "exports[0].nbd.connections = 65 is out of range 1..64" },
	{ TARGETS("") EXPORTS("  qos = { iops = -1; }; #!\n"),
	  "exports[0].qos.iops = -1 is out of range: must be at least 0" },
	{ "fuse = { uid = -1; }; #!\n", "fuse.uid = -1 is out of range 0..4294967294" },
	/* libconfig 1.5 would wrap these to 1 and -2 */
	{ TARGETS("") EXPORTS("  nsid = 4294967297; #!\n"),
	  "integer 4294967297 does not fit in 32 bits and libconfig would wrap it: write 4294967297L" },
	{ TARGETS("") EXPORTS("  nsid = 0xFFFFFFFE; #!\n"), "write 0xFFFFFFFEL" },
	{ TARGETS("") EXPORTS("  qos = { bandwidth = -5000000000; }; #!\n"), "write -5000000000L" },
	/* strings and enums */
	{ "targets = ( { name = \"a b\"; #!\n subnqn = \"nqn.x\"; " PATH_TCP " } );\n",
	  "targets[0].name: invalid value \"a b\": use 1-64 characters of A-Z a-z 0-9 . _ -" },
	{ "targets = ( { name = \"\"; #!\n subnqn = \"nqn.x\"; " PATH_TCP " } );\n",
	  "use 1-64 characters" },
	/* Review: they passed check, and the FUSE mount then failed whole. */
	{ TARGETS("") "exports = ( { name = \".\"; #!\n target = \"t1\"; nsid = 1; fuse = true; } );\n",
	  "exports[0].name: invalid value \".\": \".\" and \"..\" are not names" },
	{ TARGETS("") "exports = ( { name = \"..\"; #!\n target = \"t1\"; nsid = 1; fuse = true; } );\n",
	  "exports[0].name: invalid value \"..\": \".\" and \"..\" are not names" },
	{ "targets = ( { name = \"t\"; subnqn = \"iqn.2001-04.com.example\"; #!\n " PATH_TCP " } );\n",
	  "targets[0].subnqn: invalid value \"iqn.2001-04.com.example\": an NQN starts with \"nqn.\"" },
	{ "gateway = { hostnqn = \"host1\"; }; #!\n", "gateway.hostnqn: invalid value \"host1\"" },
	{ "gateway = { hostid = \"0f8fa3d6-0b2e-4c2d-9d3b-11111111111\"; }; #!\n",
	  "gateway.hostid: invalid value \"0f8fa3d6-0b2e-4c2d-9d3b-11111111111\": expected a UUID" },
	{ "gateway = { hostid = \"0f8fa3d6+0b2e-4c2d-9d3b-111111111111\"; }; #!\n", "expected a UUID" },
	{ "gateway = { log_level = \"verbose\"; }; #!\n",
	  "gateway.log_level: unknown value \"verbose\" (expected error|warn|notice|info|debug)" },
	{ "gateway = { control = \"control.sock\"; }; #!\n", "must be an absolute path" },
	{ "gateway = { state_dir = \"var/lib\"; }; #!\n", "gateway.state_dir: invalid value \"var/lib\": must be an absolute path" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
	  "  paths = ( { transport = \"fc\"; traddr = \"::1\"; } ); } ); #!\n",
	  "targets[0].paths[0].transport: unknown value \"fc\" (expected tcp|rdma)" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
	  "  paths = ( { transport = \"tcp\"; traddr = \"\"; } ); } ); #!\n",
	  "targets[0].paths[0].traddr: invalid value \"\": must not be empty" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
	  "  paths = ( { transport = \"tcp\"; traddr = \"::1\"; host_iface = \"a-very-long-ifname\"; } ); } ); #!\n",
	  "an interface name is at most 15 characters" },
	{ TARGETS("  multipath = \"random\"; #!\n"),
	  "unknown value \"random\" (expected failover|round-robin|queue-depth)" },
	{ TARGETS("  dhchap_secret = \"secret\"; #!\n"),
	  "targets[0].dhchap_secret: invalid secret: must start with \"DHHC-1:\"" },
	/* one character changed: the CRC-32 catches it, the value is not echoed */
	{ TARGETS("  dhchap_ctrl_secret = \"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaS:\"; #!\n"),
	  "targets[0].dhchap_ctrl_secret: invalid secret: the key's CRC-32 does not match" },
	{ TARGETS("  dhchap_secret = \"DHHC-1:05:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:\"; #!\n"),
	  "the transform must be 00, 01, 02 or 03" },
	{ TARGETS("  dhchap_ctrl_secret = \"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:\"; #!\n"),
	  "targets[0]: the controller's secret needs the host's" },
	{ TARGETS("  dhchap_secret = \"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:\";\n dhchap_secret_file = \"/tmp/x\"; #!\n"),
	  "targets[0]: set dhchap_secret or dhchap_secret_file, not both" },
	{ TARGETS("  dhchap_secret_file = \"/nonexistent/key\"; #!\n"),
	  "targets[0].dhchap_secret_file: cannot open /nonexistent/key: No such file or directory" },
	{ TARGETS("  dhchap_secret_file = \"key\"; #!\n"), "must be an absolute path" },
	{ TARGETS("") EXPORTS("  nbd = { device = \"/dev/sda\"; }; #!\n"),
	  "exports[0].nbd.device: invalid value \"/dev/sda\": expected \"/dev/nbdN\" or \"auto\"" },
	{ TARGETS("") EXPORTS("  nbd = { device = \"/dev/nbd01\"; }; #!\n"), "expected \"/dev/nbdN\"" },
	{ TARGETS("") EXPORTS("  nbd = { listen = \"tcp:host\"; }; #!\n"),
	  "exports[0].nbd.listen: invalid value \"tcp:host\": expected \"unix:PATH\", \"tcp:HOST:PORT\" or \"tcp:PORT\"" },
	{ TARGETS("") EXPORTS("  nbd = { listen = \"/run/x.sock\"; }; #!\n"), "expected \"unix:PATH\"" },
	{ TARGETS("") EXPORTS("  qos = { bandwidth = \"400MB\"; }; #!\n"),
	  "exports[0].qos.bandwidth: invalid value \"400MB\": expected bytes/s with an optional K, M, G or T suffix" },
	{ TARGETS("") EXPORTS("  qos = { bandwidth = \"99999999999G\"; }; #!\n"), "\"99999999999G\": too large" },
	/* required keys, given at the line of the group */
	{ "targets = ( { name = \"t1\"; #!\n " PATH_TCP " } );\n",
	  "targets[0]: missing required key 'subnqn'" },
	{ "targets = ( { subnqn = \"nqn.x\"; #!\n " PATH_TCP " } );\n",
	  "targets[0]: missing required key 'name'" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\"; } ); #!\n",
	  "targets[0]: missing required key 'paths'" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n  paths = ( ); } ); #!\n",
	  "targets[0].paths: needs at least 1 entry" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n  paths = ( { traddr = \"::1\"; } ); } ); #!\n",
	  "targets[0].paths[0]: missing required key 'transport'" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n  paths = ( { transport = \"tcp\"; } ); } ); #!\n",
	  "targets[0].paths[0]: missing required key 'traddr'" },
	{ TARGETS("") "exports = ( { name = \"e1\"; fuse = true; } ); #!\n",
	  "exports[0]: missing required key 'target'" },
	{ TARGETS("") "exports = ( { target = \"t1\"; fuse = true; } ); #!\n",
	  "exports[0]: missing required key 'name'" },
	/* across objects */
	{ TARGETS("") "exports = ( { name = \"e1\"; target = \"t2\"; #!\n fuse = true; } );\n",
	  "exports[0].target: unknown target 't2'" },
	{ TARGETS("") "exports = ( { name = \"e1\"; target = \"t1\"; } ); #!\n",
	  "export 'e1' has no nbd and no fuse: nothing to export" },
	{ TARGETS("") "exports = ( { name = \"e1\"; target = \"t1\"; fuse = false; } ); #!\n",
	  "nothing to export" },
	{ TARGETS("") EXPORTS("  nbd = { connections = 2; }; #!\n"),
	  "exports[0].nbd: needs a device or a listen address" },
	{ "targets = ( { name = \"t1\"; subnqn = \"nqn.x\"; " PATH_TCP " },\n"
	  "  { name = \"t1\"; subnqn = \"nqn.y\"; " PATH_TCP " } ); #!\n",
	  "targets[1].name: duplicate target name 't1' (first at line 1)" },
	{ TARGETS("") "exports = ( { name = \"e1\"; target = \"t1\"; fuse = true; },\n"
	  "  { name = \"e1\"; target = \"t1\"; fuse = true; } ); #!\n",
	  "exports[1].name: duplicate export name 'e1' (first at line 4)" },
	{ TARGETS("")
	  "exports = ( { name = \"e1\"; target = \"t1\"; nbd = { device = \"/dev/nbd0\"; }; },\n"
	  "  { name = \"e2\"; target = \"t1\"; nbd = { device = \"auto\"; }; },\n"
	  "  { name = \"e3\"; target = \"t1\"; nbd = { device = \"/dev/nbd0\"; }; } ); #!\n",
	  "exports[2].nbd.device: duplicate nbd device '/dev/nbd0' (first at line 4)" },
	/* the parser's own errors */
	{ "gateway = { reactors = ; }; #!\n", "syntax error" },
	/* Not a string where a name belongs: libconfig 1.5 leaks that string. */
	{ "gateway = { reactors = 2; };\ntargets = ( );\n7 = 1; #!\n", "syntax error" },
	{ "gateway = { reactors = 2; };\ngateway = { reactors = 3; }; #!\n", "duplicate setting name" },
	{ "gateway = {\n  reactors = 2;\n  control = ]; #!\n};\n", "syntax error" },
};

START_TEST(bad)
{
	const struct bad_case *bc = &bad_cases[_i];
	struct loaded l;
	const char *msg;

	load(&l, bc->text);
	ck_assert_msg(l.rc == -EINVAL, "case %d: rc %d, errors:\n%s", _i, l.rc,
		      l.errs);
	int nr_marks = 0;
	while (marked_line(bc->text, "#!", nr_marks))
		nr_marks++;
	ck_assert_msg(count_lines(l.errs) == (size_t)nr_marks,
		      "case %d: want %d error(s), got:\n%s", _i, nr_marks, l.errs);
	for (int i = 0; i < nr_marks; i++)
		ck_assert_int_eq(error_line(&l, i, &msg),
				 marked_line(bc->text, "#!", i));
	error_line(&l, 0, &msg);
	ck_assert_msg(strstr(msg, bc->msg), "case %d: want \"%s\" in:\n%s", _i,
		      bc->msg, l.errs);
	ck_assert_ptr_null(l.cfg);
	unload(&l);
}
END_TEST

/* Errors from every part of the file, all reported, in line order. */
START_TEST(many_errors)
{
	static const char text[] =
		"gateway = { reactors = 0; #!\n"
		"  color = true; }; #!\n"
		"targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
		"  paths = ( { transport = \"tcp\"; traddr = \"::1\"; tos = 300; } ); #!\n"
		"  queue_size = 1; #!\n"
		"}, { name = \"t1\"; #!\n"
		"  subnqn = \"nqn.y\"; paths = ( { transport = \"rdma\"; traddr = \"::2\"; } ); } );\n"
		"exports = ( { name = \"e1\"; target = \"nope\"; #!\n"
		"  nbd = { device = \"/dev/nbd1\"; }; nsid = 4294967296; }, #!\n"
		"  { name = \"e2\"; target = \"t1\";\n"
		"    nbd = { device = \"/dev/nbd1\"; }; } ); #!\n";
	static const char *const msgs[] = {
		"gateway.reactors = 0 is out of range 1..256",
		"unknown key 'color' in gateway",
		"targets[0].paths[0].tos = 300 is out of range -1..255",
		"targets[0].queue_size = 1 is out of range 2..1024",
		"targets[1].name: duplicate target name 't1' (first at line 3)",
		"exports[0].target: unknown target 'nope'",
		"integer 4294967296 does not fit in 32 bits",
		"exports[1].nbd.device: duplicate nbd device '/dev/nbd1' (first at line 9)",
	};
	const int n = sizeof(msgs) / sizeof(msgs[0]);
	struct loaded l;
	const char *msg;

	load(&l, text);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_msg(count_lines(l.errs) == (size_t)n, "got:\n%s", l.errs);
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(error_line(&l, i, &msg), marked_line(text, "#!", i));
		ck_assert_msg(strncmp(msg, msgs[i], strlen(msgs[i])) == 0,
			      "want \"%s\", got:\n%s", msgs[i], l.errs);
	}
	unload(&l);
}
END_TEST

/* Lengths at and one past each limit. */
START_TEST(length_limits)
{
	static const struct {
		const char *fmt;	/* %s is the generated string */
		const char *prefix;
		size_t ok_len;		/* of prefix + generated */
	} cases[] = {
		{ "targets = ( { name = \"%s\"; subnqn = \"nqn.x\"; " PATH_TCP " } );\n", "t", 64 },
		{ "targets = ( { name = \"t\"; subnqn = \"%s\"; " PATH_TCP " } );\n", "nqn.", 223 },
		{ "gateway = { control = \"%s\"; };\n", "/", 107 },
		{ TARGETS("") EXPORTS("  nbd = { listen = \"unix:%s\"; };\n"), "/", 107 },
	};
	char value[512];
	struct loaded l;
	char *text;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t len = cases[i].ok_len; len <= cases[i].ok_len + 1; len++) {
			size_t plen = strlen(cases[i].prefix);
			memcpy(value, cases[i].prefix, plen);
			memset(value + plen, 'a', len - plen);
			value[len] = '\0';
			ck_assert_int_ge(asprintf(&text, cases[i].fmt, value), 0);
			load(&l, text);
			ck_assert_msg(l.rc == (len == cases[i].ok_len ? 0 : -EINVAL),
				      "case %zu len %zu: %s", i, len, l.errs);
			ck_assert_int_eq(count_lines(l.errs), len != cases[i].ok_len);
			unload(&l);
			free(text);
		}
	}
}
END_TEST

/* The discovery list takes its DH-HMAC-CHAP keys from files too, with the
 * same checks and FILE:LINE errors as targets. */
START_TEST(discovery_secret_files)
{
	static const char key[] = "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:";
	char kpath[64], text[1024], ktext[128];
	struct loaded l;
	const char *msg;

	snprintf(ktext, sizeof(ktext), "%s\n", key);
	write_file(kpath, ktext, strlen(ktext));
	ck_assert_int_eq(chmod(kpath, 0600), 0);
	snprintf(text, sizeof(text),
		 "discovery = ( { transport = \"tcp\"; traddr = \"::1\";\n"
		 "  dhchap_secret_file = \"%s\";\n"
		 "  dhchap_ctrl_secret_file = \"%s\"; } );\n", kpath, kpath);
	load(&l, text);
	ck_assert_msg(l.rc == 0, "%s", l.errs);
	ck_assert_str_eq(l.cfg->discovery.ctrls[0].dhchap_secret, key);
	ck_assert_str_eq(l.cfg->discovery.ctrls[0].dhchap_ctrl_secret, key);
	unload(&l);

	ck_assert_int_eq(chmod(kpath, 0644), 0);
	load(&l, text);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_int_eq(error_line(&l, 0, &msg), 2);
	ck_assert_ptr_nonnull(strstr(msg, "discovery[0].dhchap_secret_file: "));
	ck_assert_ptr_nonnull(strstr(msg, "readable by group or others (mode 0644)"));
	unload(&l);
	ck_assert_int_eq(chmod(kpath, 0600), 0);

	snprintf(text, sizeof(text),
		 "discovery = ( { transport = \"tcp\"; traddr = \"::1\";\n"
		 "  dhchap_ctrl_secret_file = \"%s\"; } );\n", kpath);
	load(&l, text);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_int_eq(error_line(&l, 0, &msg), 2);
	ck_assert_ptr_nonnull(strstr(msg, "discovery[0]: the controller's secret needs the host's"));
	unload(&l);
	unlink(kpath);
}
END_TEST

/* Review: the libconfig 1.5 wrap check scanned the main file only, so
 * nsid = 4294967297 in an @include'd file passed and served nsid 1.  Now
 * included files are scanned too (nested ones as well), each error at the
 * included file's own line. */
START_TEST(include_wide_int)
{
	char dir[64], inc[96], inner[96], text[1024];
	struct loaded l;
	FILE *f;

	strcpy(dir, "/tmp/test_config.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(inc, sizeof(inc), "%s/exports.inc", dir);
	snprintf(inner, sizeof(inner), "%s/qos.inc", dir);
	ck_assert_ptr_nonnull(f = fopen(inc, "w"));
	fprintf(f, "# the export\n  nsid = 4294967297;\n@include \"%s\"\n", inner);
	fclose(f);
	ck_assert_ptr_nonnull(f = fopen(inner, "w"));
	fprintf(f, "  qos = { iops = 100;\n    bandwidth = -5000000000; };\n");
	fclose(f);
	snprintf(text, sizeof(text),
		 TARGETS("") "exports = ( { name = \"e1\"; target = \"t1\"; fuse = true;\n"
		 "@include \"%s\"\n"
		 "} );\n", inc);
	load(&l, text);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_msg(count_lines(l.errs) == 2, "%s", l.errs);
	snprintf(text, sizeof(text),
		 "%s:2: integer 4294967297 does not fit in 32 bits and libconfig would wrap "
		 "it: write 4294967297L\n", inc);
	ck_assert_msg(strstr(l.errs, text), "%s", l.errs);
	snprintf(text, sizeof(text), "%s:2: integer -5000000000 does not fit", inner);
	ck_assert_msg(strstr(l.errs, text), "%s", l.errs);
	unload(&l);

	/* With the L suffix it is a 64-bit integer, and out of range. */
	ck_assert_ptr_nonnull(f = fopen(inc, "w"));
	fprintf(f, "  nsid = 4294967297L;\n");
	fclose(f);
	snprintf(text, sizeof(text),
		 TARGETS("") "exports = ( { name = \"e1\"; target = \"t1\"; fuse = true;\n"
		 "@include \"%s\"\n"
		 "} );\n", inc);
	load(&l, text);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_msg(strstr(l.errs, ":1: exports[0].nsid = 4294967297 is out of range"), "%s",
		      l.errs);
	unload(&l);

	/* A file without such a literal loads. */
	ck_assert_ptr_nonnull(f = fopen(inc, "w"));
	fprintf(f, "  nsid = 7;\n");
	fclose(f);
	load(&l, text);
	ck_assert_msg(l.rc == 0, "%s", l.errs);
	ck_assert_uint_eq(l.cfg->exports[0].nsid, 7);
	unload(&l);
	unlink(inc);
	unlink(inner);
	rmdir(dir);
}
END_TEST

/* Review: a FIFO named as a secret file blocked the load in open() for as
 * long as nothing wrote to it (at a reload: reactor 0, and every export it
 * serves).  Now it is refused at once, the file named at its line.  The
 * tcase timeout is the hang guard. */
START_TEST(secret_fifo_refused)
{
	char dir[64], fifo[96], text[1024];
	struct loaded l;
	const char *msg;

	strcpy(dir, "/tmp/test_config.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/key", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	snprintf(text, sizeof(text),
		 "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
		 "  paths = ( { transport = \"tcp\"; traddr = \"::1\"; } );\n"
		 "  dhchap_secret_file = \"%s\";\n"
		 "  tls = true;\n"
		 "  tls_key_file = \"%s\"; } );\n", fifo, fifo);
	load(&l, text);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_int_eq(count_lines(l.errs), 2);
	ck_assert_int_eq(error_line(&l, 0, &msg), 3);
	ck_assert_msg(strstr(msg, "targets[0].dhchap_secret_file: ") &&
		      strstr(msg, " is not a regular file; refusing it"), "%s", l.errs);
	ck_assert_ptr_nonnull(strstr(msg, fifo));
	ck_assert_int_eq(error_line(&l, 1, &msg), 5);
	ck_assert_msg(strstr(msg, "tls_key_file: ") &&
		      strstr(msg, " is not a regular file; refusing it"), "%s", l.errs);
	ck_assert_ptr_nonnull(strstr(msg, fifo));
	ck_assert_ptr_null(l.cfg);
	unload(&l);
	unlink(fifo);
	rmdir(dir);
}
END_TEST

/* The NBD TLS keys too: a FIFO as the PSK file, or as a certificate of
 * tls_certificates, is refused, never opened (OpenSSL and the PSK loader
 * open them blocking, on reactor 0 at a reload). */
START_TEST(nbd_tls_fifo_refused)
{
	char dir[64], fifo[96], cert[96], text[1024];
	struct loaded l;
	const char *msg;

	strcpy(dir, "/tmp/test_config.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/psk", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	snprintf(text, sizeof(text),
		 "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
		 "  paths = ( { transport = \"tcp\"; traddr = \"::1\"; } ); } );\n"
		 "exports = ( { name = \"e\"; target = \"t1\";\n"
		 "  nbd = { listen = \"tcp:127.0.0.1:10809\"; tls = \"require\"; tls_psk_file = \"%s\"; }; } );\n",
		 fifo);
	load(&l, text);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_int_eq(error_line(&l, 0, &msg), 4);
	ck_assert_msg(strstr(msg, " is not a regular file; refusing it"), "%s", l.errs);
	unload(&l);
	/* A certificate directory whose server-cert.pem is a FIFO. */
	snprintf(cert, sizeof(cert), "%s/server-cert.pem", dir);
	ck_assert_int_eq(mkfifo(cert, 0600), 0);
	snprintf(text, sizeof(text), "%s/server-key.pem", dir);
	FILE *f = fopen(text, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(chmod(text, 0600), 0);
	snprintf(text, sizeof(text),
		 "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
		 "  paths = ( { transport = \"tcp\"; traddr = \"::1\"; } ); } );\n"
		 "exports = ( { name = \"e\"; target = \"t1\";\n"
		 "  nbd = { listen = \"tcp:127.0.0.1:10809\"; tls = \"require\"; tls_certificates = \"%s\"; }; } );\n",
		 dir);
	load(&l, text);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_msg(strstr(l.errs, "server-cert.pem is not a regular file; refusing it"), "%s",
		      l.errs);
	unload(&l);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Secrets: in the file itself, or in files it names; either file must be
 * private to its owner, and only a file holding a secret is checked. */
START_TEST(secrets)
{
	static const char key[] = "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:";
	char kpath[64], text[1024];
	struct loaded l;
	const char *msg;

	/* A secret file, as nvme gen-dhchap-key > FILE writes it. */
	char ktext[128];
	snprintf(ktext, sizeof(ktext), "%s\n", key);
	write_file(kpath, ktext, strlen(ktext));
	ck_assert_int_eq(chmod(kpath, 0600), 0);
	snprintf(text, sizeof(text),
		 "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
		 "  paths = ( { transport = \"tcp\"; traddr = \"::1\"; } );\n"
		 "  dhchap_secret_file = \"%s\";\n"
		 "  dhchap_ctrl_secret_file = \"%s\"; } );\n", kpath, kpath);
	load(&l, text);
	ck_assert_msg(l.rc == 0, "%s", l.errs);
	ck_assert_str_eq(l.cfg->targets[0].dhchap_secret, key);
	ck_assert_str_eq(l.cfg->targets[0].dhchap_ctrl_secret, key);
	ck_assert_str_eq(l.cfg->targets[0].dhchap_secret_file, kpath);
	unload(&l);

	/* The secret file readable by the group: refused at its line. */
	ck_assert_int_eq(chmod(kpath, 0640), 0);
	load(&l, text);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_int_eq(count_lines(l.errs), 2);
	ck_assert_int_eq(error_line(&l, 0, &msg), 3);
	ck_assert_ptr_nonnull(strstr(msg, "holds a secret and is readable by group or others (mode 0640)"));
	ck_assert_int_eq(error_line(&l, 1, &msg), 4);
	ck_assert_ptr_null(l.cfg);
	unload(&l);

	/* Not a secret inside. */
	ck_assert_int_eq(chmod(kpath, 0400), 0);
	unlink(kpath);
	write_file(kpath, "hello\n", 6);
	snprintf(text, sizeof(text),
		 "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
		 "  paths = ( { transport = \"tcp\"; traddr = \"::1\"; } );\n"
		 "  dhchap_secret_file = \"%s\"; } );\n", kpath);
	load(&l, text);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_int_eq(error_line(&l, 0, &msg), 3);
	ck_assert_ptr_nonnull(strstr(msg, "does not hold a DH-HMAC-CHAP secret"));
	unload(&l);
	unlink(kpath);

	/* The configuration file itself holding a secret must be private... */
	snprintf(text, sizeof(text),
		 "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
		 "  paths = ( { transport = \"tcp\"; traddr = \"::1\"; } );\n"
		 "  dhchap_secret = \"%s\"; } );\n", key);
	write_file(l.path, text, strlen(text));
	ck_assert_int_eq(chmod(l.path, 0644), 0);
	load_path(&l);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_int_eq(error_line(&l, 0, &msg), 3);
	ck_assert_ptr_nonnull(strstr(msg, "targets[0].dhchap_secret: "));
	ck_assert_ptr_nonnull(strstr(msg, "is readable by group or others (mode 0644)"));
	ck_assert_ptr_null(strstr(l.errs, key));
	unload(&l);
	/* ...and a world-readable one without a secret is fine. */
	snprintf(text, sizeof(text),
		 "targets = ( { name = \"t1\"; subnqn = \"nqn.x\";\n"
		 "  paths = ( { transport = \"tcp\"; traddr = \"::1\"; } ); } );\n");
	write_file(l.path, text, strlen(text));
	ck_assert_int_eq(chmod(l.path, 0644), 0);
	load_path(&l);
	ck_assert_msg(l.rc == 0, "%s", l.errs);
	ck_assert_ptr_null(l.cfg->targets[0].dhchap_secret);
	unload(&l);
}
END_TEST

START_TEST(cannot_open)
{
	struct loaded l;

	strcpy(l.path, "/nonexistent/nvmf-gateway.conf");
	load_path(&l);
	ck_assert_int_eq(l.rc, -ENOENT);
	ck_assert_ptr_null(l.cfg);
	ck_assert_str_eq(l.errs, "/nonexistent/nvmf-gateway.conf: cannot open: No such file or directory\n");
	free(l.errs);

	strcpy(l.path, "/tmp");
	load_path(&l);
	ck_assert_int_eq(l.rc, -EISDIR);
	ck_assert_str_eq(l.errs, "/tmp: cannot open: Is a directory\n");
	free(l.errs);
}
END_TEST

/* libconfig would stop reading at a NUL and ignore what follows. */
START_TEST(nul_byte)
{
	static const char text[] = "gateway = { reactors = 2; };\0foo = 1;\n";
	struct loaded l;

	write_file(l.path, text, sizeof(text) - 1);
	load_path(&l);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_ptr_nonnull(strstr(l.errs, ": not a text file (NUL byte at offset 28)"));
	unload(&l);
}
END_TEST

/* A quoted value holding newlines (a libconfig string may span lines)
 * stays one "FILE:LINE: message" line: found by fuzz_config. */
START_TEST(value_with_newline_one_error_line)
{
	static const char text[] = "gateway = { log_level = \"loud\n# not a line\r\"; };\n";
	struct loaded l;
	const char *msg;

	load(&l, text);
	ck_assert_int_eq(l.rc, -EINVAL);
	ck_assert_uint_eq(count_lines(l.errs), 1);
	ck_assert_int_eq(error_line(&l, 0, &msg), 1);
	ck_assert_msg(strstr(msg, "\"loud\\x0a# not a line\\x0d\""), "%s", msg);
	unload(&l);
}
END_TEST

/* The L suffix and small hex values are read as written. */
START_TEST(wide_literals)
{
	struct loaded l;

	load(&l, TARGETS("")
		 "exports = ( { name = \"e1\"; target = \"t1\"; fuse = true; nsid = 0x7FFFFFFF;\n"
		 "  qos = { iops = 3000000000L; bandwidth = 5000000000L; }; },\n"
		 "  { name = \"e2\"; target = \"t1\"; fuse = true; nsid = 4294967294L;\n"
		 "    qos = { iops = 2147483647; bandwidth = \"2147483648\"; }; } );\n"
		 "# 99999999999 in a comment, 1e100 /* 99999999999 */\n"
		 "fuse = { uid = 4000000000L; gid = 0x10; mountpoint = \"/tmp/99999999999\"; };\n");
	ck_assert_msg(l.rc == 0, "rc %d: %s", l.rc, l.errs);
	ck_assert_uint_eq(l.cfg->exports[0].nsid, 0x7FFFFFFF);
	ck_assert_uint_eq(l.cfg->exports[0].qos_iops, 3000000000u);
	ck_assert_uint_eq(l.cfg->exports[0].qos_bandwidth, 5000000000u);
	ck_assert_uint_eq(l.cfg->exports[1].nsid, 4294967294u);
	ck_assert_uint_eq(l.cfg->exports[1].qos_iops, 2147483647);
	ck_assert_uint_eq(l.cfg->exports[1].qos_bandwidth, 2147483648u);
	ck_assert_uint_eq(l.cfg->fuse.uid, 4000000000u);
	ck_assert_uint_eq(l.cfg->fuse.gid, 16);
	unload(&l);
}
END_TEST

/* ---- the shared parsers ---- */

START_TEST(parse_size)
{
	static const struct {
		const char *s;
		int rc;
		uint64_t v;
	} cases[] = {
		{ "0", 0, 0 },
		{ "512", 0, 512 },
		{ "4k", 0, 4096 },
		{ "4K", 0, 4096 },
		{ "400M", 0, 400ull << 20 },
		{ "1G", 0, 1ull << 30 },
		{ "1g", 0, 1ull << 30 },
		{ "2T", 0, 2ull << 40 },
		{ "18446744073709551615", 0, UINT64_MAX },
		{ "16777215T", 0, 16777215ull << 40 },
		{ "16777216T", -ERANGE, 0 },
		{ "18446744073709551616", -ERANGE, 0 },
		{ "99999999999999999999999", -ERANGE, 0 },
		{ "17179869184G", -ERANGE, 0 },
		{ "", -EINVAL, 0 },
		{ "k", -EINVAL, 0 },
		{ "-1", -EINVAL, 0 },
		{ "+1", -EINVAL, 0 },
		{ " 1", -EINVAL, 0 },
		{ "1 ", -EINVAL, 0 },
		{ "1.5G", -EINVAL, 0 },
		{ "4KB", -EINVAL, 0 },
		{ "4KiB", -EINVAL, 0 },
		{ "0x10", -EINVAL, 0 },
		{ "4P", -EINVAL, 0 },
		{ "abc", -EINVAL, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 12345;
		int rc = gw_parse_size(cases[i].s, &v);
		ck_assert_msg(rc == cases[i].rc, "\"%s\": rc %d", cases[i].s, rc);
		ck_assert_msg(rc || v == cases[i].v, "\"%s\": %llu", cases[i].s,
			      (unsigned long long)v);
		ck_assert_msg(!rc || v == 12345, "\"%s\": output touched", cases[i].s);
	}
}
END_TEST

START_TEST(parse_nbd_device)
{
	int v;

	ck_assert_int_eq(config_parse_nbd_device("auto", &v), 0);
	ck_assert_int_eq(v, GW_NBD_AUTO);
	ck_assert_int_eq(config_parse_nbd_device("/dev/nbd0", &v), 0);
	ck_assert_int_eq(v, 0);
	ck_assert_int_eq(config_parse_nbd_device("/dev/nbd15", &v), 0);
	ck_assert_int_eq(v, 15);
	static const char *const bad[] = {
		"", "/dev/nbd", "/dev/nbd-1", "/dev/nbd01", "/dev/nbd1p1",
		"/dev/nbd1234567890", "nbd0", "/dev/sda", "AUTO",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(config_parse_nbd_device(bad[i], &v) == -EINVAL,
			      "\"%s\" accepted", bad[i]);
}
END_TEST

START_TEST(parse_listen)
{
	static const struct {
		const char *s;
		enum gw_listen_kind kind;
		const char *path, *host;
		uint16_t port;
	} good[] = {
		{ "unix:/run/x.sock", GW_LISTEN_UNIX, "/run/x.sock", NULL, 0 },
		{ "unix:rel.sock", GW_LISTEN_UNIX, "rel.sock", NULL, 0 },
		{ "tcp:10809", GW_LISTEN_TCP, NULL, NULL, 10809 },
		{ "tcp::10809", GW_LISTEN_TCP, NULL, NULL, 10809 },
		{ "tcp:127.0.0.1:1", GW_LISTEN_TCP, NULL, "127.0.0.1", 1 },
		{ "tcp:localhost:65535", GW_LISTEN_TCP, NULL, "localhost", 65535 },
		{ "tcp:[::1]:10809", GW_LISTEN_TCP, NULL, "::1", 10809 },
		{ "tcp:::1:10809", GW_LISTEN_TCP, NULL, "::1", 10809 },
	};
	static const char *const bad[] = {
		"", "unix:", "tcp:", "tcp:0", "tcp:65536", "tcp:host", "tcp:host:",
		"tcp:host:x1", "tcp:[::1:10809", "tcp:[]:10809x", "udp:1", "/run/x.sock",
		"unix:/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	};
	struct gw_listen l;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_msg(gw_listen_parse(good[i].s, &l) == 0, "\"%s\"", good[i].s);
		ck_assert_int_eq(l.kind, good[i].kind);
		ck_assert_str_eq(l.spec, good[i].s);
		ck_assert_pstr_eq(l.path, good[i].path);
		ck_assert_pstr_eq(l.host, good[i].host);
		ck_assert_uint_eq(l.port, good[i].port);
		gw_listen_free(&l);
		ck_assert_int_eq(l.kind, GW_LISTEN_NONE);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(gw_listen_parse(bad[i], &l) == -EINVAL,
			      "\"%s\" accepted", bad[i]);
}
END_TEST

/* ---- access groups (issue 16) ---- */

START_TEST(access_good)
{
	struct loaded l;

	load(&l, "gateway = { metrics = \"tcp:[::1]:9465\";\n"
		 "  metrics_access = { allow_from = [ \"::1\", \"10.0.0.0/8\" ]; };\n"
		 "  control_access = { mode = \"0660\"; group = 0; allow_users = ( \"root\", 1000 ); }; };\n"
		 TARGETS("")
		 "exports = ( { name = \"e1\"; target = \"t1\"; nbd = { listen = \"unix:/tmp/e1.sock\";\n"
		 "  access = { mode = \"0640\"; owner = \"root\"; group = \"root\"; allow_groups = ( 0, 4242 ); }; }; },\n"
		 "  { name = \"e2\"; target = \"t1\"; nbd = { listen = \"tcp::10809\"; }; } );\n");
	ck_assert_msg(l.rc == 0, "%s", l.errs);
	const struct gw_access *m = &l.cfg->metrics.access, *c = &l.cfg->control_access;
	const struct gw_access *e1 = &l.cfg->exports[0].nbd.listen.access;
	const struct gw_access *e2 = &l.cfg->exports[1].nbd.listen.access;
	ck_assert_int_eq(m->nr_cidrs, 2);
	ck_assert_int_eq(m->cidrs[1].bits, 96 + 8);
	ck_assert(c->mode == 0660 && c->has_group && c->group == 0 && !c->has_owner);
	ck_assert(c->nr_uids == 2 && c->uids[0] == 0 && c->uids[1] == 1000);
	ck_assert(e1->mode == 0640 && e1->has_owner && e1->owner == 0);
	ck_assert(e1->nr_gids == 2 && e1->gids[1] == 4242 && !e1->nr_uids);
	/* No rules, and "tcp::PORT" is loopback like "tcp:PORT". */
	ck_assert(!e2->mode && !e2->nr_cidrs && !e2->nr_uids);
	ck_assert_ptr_null(l.cfg->exports[1].nbd.listen.host);
	unload(&l);
}
END_TEST

#define NBD_ACCESS(listen, access)                                       \
	TARGETS("") "exports = ( { name = \"e1\"; target = \"t1\";\n"        \
	"  nbd = { listen = \"" listen "\";\n    access = " access "; }; } ); #!\n"

static const struct bad_case access_bad_cases[] = {
	{ NBD_ACCESS("unix:/tmp/x.sock", "{ allow_from = [ \"127.0.0.1\" ]; }"),
	  "exports[0].nbd.access: allow_from applies to tcp: listeners only" },
	{ NBD_ACCESS("tcp:127.0.0.1:1", "{ mode = \"0600\"; }"),
	  "exports[0].nbd.access: mode, owner, group, allow_users and allow_groups apply to unix: listeners only" },
	{ NBD_ACCESS("unix:/tmp/x.sock", "{ mode = \"0060\"; }"),
	  "nbd.access.mode: expected an octal mode in quotes" },
	{ NBD_ACCESS("unix:/tmp/x.sock", "{ mode = 432; }"), "nbd.access.mode: expected an octal mode" },
	{ NBD_ACCESS("unix:/tmp/x.sock", "{ owner = \"no-such-user-nvmfgw\"; }"),
	  "exports[0].nbd.access.owner: no such user \"no-such-user-nvmfgw\"" },
	{ NBD_ACCESS("unix:/tmp/x.sock", "{ allow_groups = [ \"no-such-group-nvmfgw\" ]; }"),
	  "exports[0].nbd.access.allow_groups[0]: no such group" },
	{ NBD_ACCESS("unix:/tmp/x.sock", "{ allow_users = 0; }"),
	  "exports[0].nbd.access.allow_users: expected a list" },
	{ NBD_ACCESS("tcp:127.0.0.1:1", "{ allow_from = [ \"10.1.2.3/8\" ]; }"),
	  "allow_from[0]: invalid value \"10.1.2.3/8\"" },
	{ NBD_ACCESS("tcp:127.0.0.1:1", "{ allow = [ \"10.0.0.0/8\" ]; }"),
	  "unknown key 'allow' in exports[0].nbd.access" },
	{ NBD_ACCESS("tcp:127.0.0.1:1",
		     "{ allow_from = [ \"1.0.0.1\", \"1.0.0.2\", \"1.0.0.3\", \"1.0.0.4\", \"1.0.0.5\", "
		     "\"1.0.0.6\", \"1.0.0.7\", \"1.0.0.8\", \"1.0.0.9\", \"1.0.0.10\", \"1.0.0.11\", "
		     "\"1.0.0.12\", \"1.0.0.13\", \"1.0.0.14\", \"1.0.0.15\", \"1.0.0.16\", \"1.0.0.17\" ]; }"),
	  "allow_from: at most 16 entries" },
	{ "gateway = { control_access = { allow_from = [ \"::1\" ]; }; }; #!\n",
	  "gateway.control_access: allow_from applies to tcp: listeners only" },
	{ "gateway = { metrics_access = { allow_from = [ \"::1\" ]; }; }; #!\n",
	  "gateway.metrics_access: there is no listener to guard" },
};

START_TEST(access_bad)
{
	const struct bad_case *bc = &access_bad_cases[_i];
	struct loaded l;
	const char *msg;

	load(&l, bc->text);
	ck_assert_msg(l.rc == -EINVAL, "case %d: rc %d, errors:\n%s", _i, l.rc, l.errs);
	ck_assert_msg(count_lines(l.errs) == 1, "case %d: want one error, got:\n%s", _i, l.errs);
	ck_assert_int_eq(error_line(&l, 0, &msg), marked_line(bc->text, "#!", 0));
	ck_assert_msg(strstr(msg, bc->msg), "case %d: want \"%s\" in:\n%s", _i, bc->msg, l.errs);
	unload(&l);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("load");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, full_file);
	tcase_add_test(tc, defaults);
	tcase_add_test(tc, reactors_default_follows_file);
	tcase_add_test(tc, empty_file);
	tcase_add_test(tc, summary);
	tcase_add_loop_test(tc, bad, 0, sizeof(bad_cases) / sizeof(bad_cases[0]));
	tcase_add_test(tc, many_errors);
	tcase_add_test(tc, length_limits);
	tcase_add_test(tc, secrets);
	tcase_add_test(tc, secret_fifo_refused);
	tcase_add_test(tc, nbd_tls_fifo_refused);
	tcase_add_test(tc, include_wide_int);
	tcase_add_test(tc, discovery_secret_files);
	tcase_add_test(tc, cannot_open);
	tcase_add_test(tc, nul_byte);
	tcase_add_test(tc, value_with_newline_one_error_line);
	tcase_add_test(tc, wide_literals);
	suite_add_tcase(s, tc);
	tc = tcase_create("parsers");
	tcase_add_test(tc, parse_size);
	tcase_add_test(tc, parse_nbd_device);
	tcase_add_test(tc, parse_listen);
	suite_add_tcase(s, tc);
	tc = tcase_create("access");
	tcase_add_test(tc, access_good);
	tcase_add_loop_test(tc, access_bad, 0,
			    sizeof(access_bad_cases) / sizeof(access_bad_cases[0]));
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
