/* Configuration: the libconfig file of DESIGN.md loaded into plain structs.
 * Everything is validated at load time, so the rest of the gateway can take
 * every field as given: strings are non-NULL unless documented as optional,
 * numbers are in range, every export's target is resolved. */
#ifndef GW_CONFIG_H
#define GW_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gateway/base/access.h"
#include "gateway/base/listen.h"
#include "gateway/base/log.h"
#include "gateway/base/reclaim.h"
#include "gateway/volume/mpath.h"
#include "transports/transport.h"

#define GW_CONFIG_DEFAULT_PATH "/etc/nvmf-gateway/nvmf-gateway.conf"
#define GW_CONTROL_DEFAULT_PATH "/run/nvmf-gateway/gateway.control"

struct gw_path {
	enum nvmf_trtype transport;
	char *traddr;
	char *trsvcid;		/* decimal port, "4420" by default */
	char *host_traddr;	/* optional (NULL) */
	char *host_iface;	/* optional (NULL) */
	int tos;		/* -1: leave the socket's default */
	/* -1: the target's tls; 0 or 1: what discovery decided from the
	 * port's TREQ (daemon_discovery.c disc_entry_tls). */
	int tls;
};

/* tls of a target or policy: false, true, or "require" (also over a port
 * whose discovery log entry says TLS is not required). */
enum gw_tls_mode { GW_TLS_OFF, GW_TLS_ON, GW_TLS_REQUIRE };

struct gw_target {
	char *name;
	char *subnqn;
	struct gw_path *paths;
	size_t nr_paths;	/* >= 1 */
	bool paths_discovered;	/* filled in by a discovery controller, not read from the file */
	int nr_io_queues;
	int queue_size;
	bool hdr_digest;
	bool data_digest;
	int keep_alive_tmo;	/* seconds, 0 = no keep-alive */
	int reconnect_delay;	/* seconds */
	int ctrl_loss_tmo;	/* seconds, -1 = reconnect forever */
	int fast_io_fail_tmo;	/* seconds, -1 = off */
	int io_timeout;		/* seconds */
	int max_retries;
	enum mp_policy multipath;
	/* DH-HMAC-CHAP: the host's secret and the controller's (mutual
	 * authentication), "DHHC-1:..." and checked; from the key itself or
	 * read from the *_file named.  All optional (NULL). */
	char *dhchap_secret;
	char *dhchap_ctrl_secret;
	char *dhchap_secret_file;
	char *dhchap_ctrl_secret_file;
	/* NVMe/TCP TLS 1.3 with a configured PSK: tls_key_file (private, as
	 * a secret file) holds the interchange key, read into tls_key at load;
	 * tls_kdf is enum nvmf_tls_kdf, how the TLS PSK is derived from it.
	 * tls is enum gw_tls_mode: non-zero means a key is configured. */
	int tls;
	char *tls_key_file;
	int tls_kdf;
	struct nvmf_tls_key tls_key;
	/* A target not reached yet (boot order): its exports wait this long
	 * for the first connect, then fail.  Seconds, -1 = forever. */
	int connect_loss_tmo;
};

#define GW_NBD_NONE (-2)	/* no kernel device, socket only */
#define GW_NBD_AUTO (-1)	/* first free /dev/nbdN */

struct gw_nbd {
	int device;		/* N of /dev/nbdN, GW_NBD_AUTO or GW_NBD_NONE */
	struct gw_listen listen;	/* kind GW_LISTEN_NONE if not set */
	int connections;
	struct gw_access access;	/* as parsed; see gw_listen.access */
	int max_connections;	/* clients at once; 0 = gateway.max_connections */
	/* enum nbd_kdev_iface of the device: the export's nbd.interface, else
	 * gateway.nbd_interface (resolved by config_load; -1 while parsing). */
	int iface;
	/* NBD over TLS on the listener (gateway/config_nbd_tls.c). */
	int tls;		/* enum nbd_tls_mode */
	char *tls_psk_file;
	char *tls_certificates;
	bool tls_verify_peer;
	int tls_max_handshakes;	/* 0: NBD_TLS_DEFAULT_MAX_HANDSHAKES */
};

/* The TLS keys of two NBD groups are the same (reload). */
bool cfg_nbd_tls_equal(const struct gw_nbd *a, const struct gw_nbd *b);

struct gw_export {
	char *name;
	char *target_name;
	struct gw_target *target;	/* resolved, points into gw_config */
	uint32_t nsid;
	bool has_nbd;		/* the nbd section is present */
	struct gw_nbd nbd;
	bool fuse;
	bool read_only;
	uint64_t qos_iops;	/* 0 = unlimited */
	uint64_t qos_bandwidth;	/* bytes/s, 0 = unlimited */
	uint64_t qos_read_iops, qos_write_iops;		/* 0 = unlimited */
	uint64_t qos_read_bandwidth, qos_write_bandwidth;	/* bytes/s */
};

/* A discovery controller to ask for targets (issue 19): from the
 * "discovery" list, or one line of the discovery_conf file (file and line
 * then say which, for messages). */
struct gw_discovery {
	enum nvmf_trtype transport;
	char *traddr;
	char *trsvcid;		/* decimal port; 8009 (tcp) or 4420 (rdma) by default */
	char *host_traddr;	/* optional (NULL) */
	char *host_iface;	/* optional (NULL) */
	char *hostnqn;		/* optional (NULL): gateway.hostnqn */
	bool persistent;	/* stay connected and follow log changes (default) */
	int keep_alive_tmo;	/* seconds */
	int reconnect_delay;	/* seconds, the first retry; backoff doubles to 60 s */
	char *dhchap_secret;	/* optional (NULL), as for targets */
	char *dhchap_ctrl_secret;
	char *dhchap_secret_file; /* optional: read into dhchap_secret at load */
	char *dhchap_ctrl_secret_file;
	/* NVMe/TCP TLS to the discovery controller, as for targets; from a
	 * discovery_conf line: --tls and --tls_key (a key file, or the key
	 * inline: then tls_key_file stays NULL and tls_key_inline is set). */
	bool tls;
	char *tls_key_file;
	int tls_kdf;
	bool tls_key_inline;
	struct nvmf_tls_key tls_key;
	const char *src_file;	/* discovery_conf entries: discovery.conf, else NULL */
	int src_line;
};

struct gw_discovery_set {
	struct gw_discovery *ctrls;
	size_t nr;
	char *conf;		/* discovery_conf: nvme-cli's file, optional (NULL) */
};

/* An auto_export policy (issue 19, gateway/config_auto.c): an export
 * without target and nsid, made for every namespace whose subsystem NQN
 * matches the glob; name and nbd.listen are templates (%n the subsystem
 * NQN's last component, sanitized; %i the nsid; %t the target's name; %%). */
struct gw_auto_export {
	char *subnqn;		/* fnmatch glob */
	uint32_t nsid;		/* 0: any */
	char *name;		/* template */
	bool has_nbd;
	int nbd_device;		/* GW_NBD_AUTO or GW_NBD_NONE */
	char *nbd_listen;	/* template, "unix:PATH"; optional (NULL) */
	int nbd_connections;	/* 0 until loaded: gateway.reactors */
	int nbd_max_connections;
	int nbd_iface;		/* -1 until loaded: gateway.nbd_interface */
	bool fuse;
	bool read_only;
	uint64_t qos_iops, qos_bandwidth, qos_read_iops, qos_write_iops;
	uint64_t qos_read_bandwidth, qos_write_bandwidth;
	/* The TLS of the targets the policy makes (enum gw_tls_mode, as a
	 * target's). */
	int tls;
	char *tls_key_file;
	int tls_kdf;
	struct nvmf_tls_key tls_key;
	int line;		/* in the file, for messages */
};

struct gw_auto_set {
	struct gw_auto_export *v;
	size_t nr;
};

struct gw_fuse {
	char *mountpoint;
	bool allow_other;
	uint32_t uid;
	uint32_t gid;
};

struct gw_config {
	char *path;		/* the file it was loaded from */
	int reactors;
	int reactor_backend;	/* enum reactor_backend_mode: auto (0) */
	int poll_us;		/* busy-poll window, 0: off */
	int nbd_interface;	/* enum nbd_kdev_iface: auto (0) */
	char *control;
	char *state_dir;
	enum log_level log_level;
	char *hostnqn;		/* optional (NULL) */
	char *hostid;		/* optional (NULL) */
	/* Prometheus endpoint: kind GW_LISTEN_NONE (the default) = off. */
	struct gw_listen metrics;
	/* gateway.control_access and gateway.metrics_access (the latter also
	 * copied into metrics.access). */
	struct gw_access control_access, metrics_access;
	struct gw_target *targets;
	size_t nr_targets;
	struct gw_export *exports;
	size_t nr_exports;
	struct gw_fuse fuse;
	struct gw_discovery_set discovery;	/* issue 19 */
	struct gw_auto_set auto_export;		/* issue 19: config_auto.c */
	/* Memory and connections (README "Limits and security"). */
	uint64_t buffer_budget;	/* bytes of NBD and FUSE data buffers */
	int max_connections;	/* per NBD listener, unless the export says */
	int stall_timeout;	/* s; a client taking no replies is cut off
				 * after this when others wait for buffers */
	struct reclaim_opts reclaim;	/* gateway.mlock, io_flusher, oom_score_adj, nice */
	/* What the defaults of targets, exports and policies were resolved
	 * against (nr_io_queues and nbd.connections: reactors; nbd.iface:
	 * nbd_interface): this file's keys, or in a file a running gateway
	 * loads (config_load_running) the running ones: those keys change at
	 * a restart only, so an object that only inherits them is the same. */
	int dflt_reactors;
	int dflt_nbd_interface;
};

/* Loads and validates PATH.  0 with *out set, or -EINVAL after printing
 * every error as one "FILE:LINE: message" line to ERRS, or -errno when the
 * file cannot be read ("FILE: cannot open: ...").  Integer literals beyond
 * 32 bits need libconfig's L suffix (4294967294L); without it libconfig 1.5
 * wraps them silently, so they are reported as errors. */
int config_load(const char *path, struct gw_config **out, FILE *errs);
/* As config_load, for the file a running gateway applies (reload,
 * export-add): defaults that come from keys only a restart changes are
 * RUNNING's (its dflt_reactors, dflt_nbd_interface), not the file's. */
int config_load_running(const char *path, const struct gw_config *running,
			struct gw_config **out, FILE *errs);
void config_free(struct gw_config *cfg);
/* "FILE: OK: 2 targets (3 paths), 4 exports (3 nbd, 2 fuse)" */
void config_summary(const struct gw_config *cfg, FILE *f);
/* The control socket when the file names none: GW_CONTROL_DEFAULT_PATH
 * as root, $XDG_RUNTIME_DIR/nvmf-gateway/gateway.control otherwise (when
 * that variable is set). */
void config_default_control(char *buf, size_t len);
struct gw_target *config_find_target(const struct gw_config *cfg,
				     const char *name);

/* Parsers shared with the CLI (sizes and listeners: gateway/base/parse.h
 * and listen.h).  0, or -EINVAL on bad syntax. */
/* "/dev/nbdN" -> N, "auto" -> GW_NBD_AUTO. */
int config_parse_nbd_device(const char *s, int *out);

/* ---- auto_export (gateway/config_auto.c) ---- */
/* Expands template TMPL for a namespace into OUT: 0, -EINVAL at an
 * unknown %x (*bad then points at it), -ENAMETOOLONG. */
int config_auto_expand(const char *tmpl, const char *subnqn, uint32_t nsid, const char *tname,
		       char *out, size_t len, const char **bad);
/* The last ':'-separated component of NQN with every character that a
 * name may not hold made '_' (the whole NQN so when that is empty). */
void config_auto_nqn_short(const char *nqn, char *out, size_t len);
bool config_auto_match(const struct gw_auto_export *p, const char *subnqn, uint32_t nsid);
/* The first policy of CFG for the namespace, -1 if none. */
int config_auto_find(const struct gw_config *cfg, const char *subnqn, uint32_t nsid);
/* A file of its own holding one export: policy IDX of CFG made for nsid
 * of target TGT (which the export points to, not copied).  0, or -errno
 * with WHY said. */
int config_auto_build(const struct gw_config *cfg, size_t idx, struct gw_target *tgt,
		      uint32_t nsid, struct gw_config **out, char *why, size_t whylen);
/* A file of its own holding one target, NAME for SUBNQN without paths
 * (discovery fills them), with the defaults of a configured one and the
 * TLS settings of policy P (NULL: none). */
struct gw_config *config_auto_target(const struct gw_config *cfg, const char *name,
				     const char *subnqn, const struct gw_auto_export *p);
/* The policy whose subnqn glob matches (whatever its nsid) with the
 * strictest TLS, the first of equals; -1. */
int config_auto_find_subsys(const struct gw_config *cfg, const char *subnqn);

#endif
