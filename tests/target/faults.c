/* Fault knobs: one text command per line, from the control socket or (the
 * same words) from the command line.  Each knob logs when it acts, so a
 * test can tell an injected failure from a real one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "tests/target/tgt.h"

static int parse_num(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;
	if (!s || !*s)
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

static void drop_all(const char *why)
{
	unsigned cnt = 0;

	/* Closing moves a connection (and, for an admin queue, its
	 * controller's other queues) off T.conns: take the first until none. */
	while (!list_empty(&T.conns)) {
		conn_close(container_of(T.conns.next, struct tgt_conn, link), why);
		cnt++;
	}
	T.f.nr_injected++;
	log_notice("fault: dropped %u connections (%s)", cnt, why);
}

void faults_count_command(void)
{
	if (T.f.drop_after < 0)
		return;
	if (--T.f.drop_after <= 0) {
		T.f.drop_after = -1;
		drop_all("drop-after count reached");
	}
}

static uint64_t rng_next(void)
{
	uint64_t x = T.f.rng ? T.f.rng : 0x9e3779b97f4a7c15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	T.f.rng = x;
	return x;
}

uint64_t faults_rng(void) { return rng_next(); }

uint16_t faults_io_status(uint32_t nsid)
{
	if (!T.f.status || (T.f.status_nsid && nsid != T.f.status_nsid))
		return 0;
	if (T.f.status_frac < 1.0 && (double)(rng_next() >> 11) / 9007199254740992.0 >= T.f.status_frac)
		return 0;
	/* The first few are logged; stats counts them all. */
	if (T.f.nr_injected++ < 10)
		log_info("fault: I/O command failed with status 0x%04x", T.f.status);
	return T.f.status;
}

static const char *const kinds[] = { [BAD_TYPE] = "type", [BAD_HLEN] = "hlen",
				     [BAD_CID] = "cid", [BAD_PLEN] = "plen" };

/* Returns 0 ("ok") or -1 with the reason in reply. */
int faults_command(char *line, char *reply, size_t len)
{
	char *w[8];
	unsigned nw = 0;
	unsigned long long v;

	for (char *s = strtok(line, " \t\r\n"); s && nw < 8; s = strtok(NULL, " \t\r\n"))
		w[nw++] = s;
	snprintf(reply, len, "ok");
	if (!nw) {
		snprintf(reply, len, "err empty command");
		return -1;
	}
	if (!strcmp(w[0], "ping") && nw == 1)
		return 0;
	if (!strcmp(w[0], "drop") && nw == 1) {
		drop_all("drop command");
		return 0;
	}
	if (!strcmp(w[0], "drop-after") && nw == 2 && !parse_num(w[1], 1u << 30, &v) && v) {
		T.f.drop_after = (int64_t)v;
		log_notice("fault: every connection drops after %llu more commands", v);
		return 0;
	}
	if (!strcmp(w[0], "refuse") && nw == 2 && !parse_num(w[1], 3600, &v)) {
		if (v) {
			T.f.refuse_until_ns = now_ns() + v * 1000000000ull;
			tgt_listen_close();
			log_notice("fault: refusing connections for %llu s", v);
		} else {
			T.f.refuse_until_ns = 0;
			if (tgt_listen_open() < 0) {
				snprintf(reply, len, "err cannot listen again");
				return -1;
			}
		}
		return 0;
	}
	if (!strcmp(w[0], "delay") && nw == 2 && !parse_num(w[1], 600000, &v)) {
		T.f.delay_ms = (uint32_t)v;
		log_notice("fault: I/O completions delayed by %llu ms", v);
		return 0;
	}
	if (!strcmp(w[0], "admin-delay") && nw == 2 && !parse_num(w[1], 600000, &v)) {
		T.f.admin_delay_ms = (uint32_t)v;
		log_notice("fault: admin queue answers delayed by %llu ms", v);
		return 0;
	}
	if (!strcmp(w[0], "reorder") && nw == 2 && !parse_num(w[1], 600000, &v)) {
		T.f.reorder_ms = (uint32_t)v;
		log_notice("fault: I/O commands executed after a random 0..%llu ms", v);
		return 0;
	}
	if (!strcmp(w[0], "status") && nw == 2 && !strcmp(w[1], "off")) {
		T.f.status = 0;
		return 0;
	}
	if (!strcmp(w[0], "status-ns") && nw == 2 && !parse_num(w[1], 0xffffffffu, &v)) {
		/* The status knob then fails only this namespace's I/O (0: all),
		 * as nvmet does for a disabled namespace. */
		T.f.status_nsid = (uint32_t)v;
		log_notice("fault: the status knob applies to %s%llu", v ? "nsid " : "every nsid; ",
			   v);
		return 0;
	}
	if (!strcmp(w[0], "late") && nw == 2 && !parse_num(w[1], 600000, &v)) {
		T.f.late_ms = (uint32_t)v;
		log_notice("fault: I/O commands executed %llu ms after they arrive", v);
		return 0;
	}
	/* A transient Identify failure (Command Interrupted 0x21, say): the
	 * namespace is still there. */
	if ((!strcmp(w[0], "id-ns-fail") || !strcmp(w[0], "id-desc-fail")) && nw == 3 &&
	    !parse_num(w[1], 1000, &v)) {
		unsigned long long sc;
		if (parse_num(w[2], 0xff, &sc))
			goto bad;
		if (!strcmp(w[0], "id-desc-fail"))
			T.f.id_desc_fail = (unsigned)v;
		else
			T.f.id_ns_fail = (unsigned)v;
		T.f.id_ns_status = (uint16_t)sc;
		log_notice("fault: the next %llu Identify Namespace fail with status 0x%02llx", v, sc);
		return 0;
	}
	if (!strcmp(w[0], "cqt") && nw == 2 && !parse_num(w[1], 0xffff, &v)) {
		T.cqt = (uint16_t)v;
		log_notice("fault: Identify CQT = %llu ms from the next Identify", v);
		return 0;
	}
	if (!strcmp(w[0], "crdt") && nw == 4) {
		unsigned long long c[3];
		for (unsigned k = 0; k < 3; k++)
			if (parse_num(w[1 + k], 0xffff, &c[k]))
				goto bad;
		for (unsigned k = 0; k < 3; k++)
			T.crdt[k] = (uint16_t)c[k];
		log_notice("fault: Identify CRDT1..3 = %llu %llu %llu (x 100 ms) from the next "
			   "Identify", c[0], c[1], c[2]);
		return 0;
	}
	if (!strcmp(w[0], "ana-after-pieces") && (nw == 4 || nw == 5)) {
		unsigned long long nsid, port = 1;
		int st = ana_state_parse(w[3]);
		if (parse_num(w[2], 0xffffffffu, &nsid) || !nsid || st < 0 ||
		    (nw == 5 && (parse_num(w[4], TGT_MAX_PORTS, &port) || !port)))
			goto bad;
		snprintf(T.f.ana_mid_nqn, sizeof(T.f.ana_mid_nqn), "%s", w[1]);
		T.f.ana_mid_nsid = (uint32_t)nsid;
		T.f.ana_mid_port = (unsigned)port - 1;
		T.f.ana_mid_state = (uint8_t)st;
		log_notice("fault: after the next ANA log read on port %llu at an offset that "
			   "reaches the end, nsid %llu there becomes %s (no event)", port, nsid, w[3]);
		return 0;
	}
	if (!strcmp(w[0], "status") && nw >= 3 && nw <= 6) {
		unsigned long long sct, sc;
		bool dnr = false;
		unsigned crd = 0;
		double frac = 1.0;
		unsigned i = 3;
		if (parse_num(w[1], 7, &sct) || parse_num(w[2], 0xff, &sc) || (!sct && !sc))
			goto bad;
		if (i < nw && !strcmp(w[i], "dnr"))
			dnr = true, i++;
		if (i < nw && !strncmp(w[i], "crd", 3) && w[i][3] >= '1' && w[i][3] <= '3' &&
		    !w[i][4])
			crd = (unsigned)(w[i][3] - '0'), i++;
		if (i < nw) {
			char *end;
			frac = strtod(w[i], &end);
			if (*end || !(frac > 0.0 && frac <= 1.0))
				goto bad;
			i++;
		}
		if (i != nw)
			goto bad;
		T.f.status = (uint16_t)(ST(sct, sc) | (dnr ? ST_DNR : 0) | (crd << 11));
		T.f.status_frac = frac;
		log_notice("fault: status sct 0x%llx sc 0x%02llx%s crd %u for %.0f%% of I/O commands",
			   sct, sc, dnr ? " dnr" : "", crd, frac * 100);
		return 0;
	}
	if (!strcmp(w[0], "corrupt") && (nw == 2 || (nw == 3 && !strcmp(w[2], "io")))) {
		T.f.corrupt_io_only = nw == 3;
		if (!strcmp(w[1], "hdgst"))
			T.f.corrupt_hdgst = true;
		else if (!strcmp(w[1], "ddgst"))
			T.f.corrupt_ddgst = true;
		else
			goto bad;
		log_notice("fault: the next %s sent%s will be wrong", w[1],
			   nw == 3 ? " on an I/O queue" : "");
		return 0;
	}
	if (!strcmp(w[0], "malformed") && nw == 2) {
		for (int k = BAD_TYPE; k <= BAD_PLEN; k++)
			if (!strcmp(w[1], kinds[k])) {
				T.f.malformed = k;
				log_notice("fault: a malformed PDU (%s) before the next I/O completion",
					   w[1]);
				return 0;
			}
		goto bad;
	}
	if (!strcmp(w[0], "ana") && nw >= 4 && nw <= 6) {
		unsigned long long nsid, port = 1;
		int st = ana_state_parse(w[3]);
		/* "noaen": the state changes but no event tells the host, as
		 * when an AEN is lost; only an ANA status or a log re-read
		 * can reveal it. */
		bool aen = !(nw >= 5 && !strcmp(w[nw - 1], "noaen"));
		unsigned nargs = nw - (aen ? 0 : 1);
		if (parse_num(w[2], 0xffffffffu, &nsid) || st < 0 || nargs > 5 ||
		    (nargs == 5 && (parse_num(w[4], TGT_MAX_PORTS, &port) || !port)))
			goto bad;
		char err[128];
		if (nvme_set_ana(w[1], (uint32_t)nsid, (unsigned)port - 1, (uint8_t)st, aen, err,
				 sizeof(err)) < 0) {
			snprintf(reply, len, "err %s", err);
			return -1;
		}
		T.f.nr_injected++;
		return 0;
	}
	if ((!strcmp(w[0], "disc-hide") || !strcmp(w[0], "disc-show")) && nw == 2) {
		char err[128];
		if (nvme_disc_show(w[1], w[0][5] == 's', err, sizeof(err)) < 0) {
			snprintf(reply, len, "err %s", err);
			return -1;
		}
		return 0;
	}
	if (!strcmp(w[0], "disc-referral") && nw == 3) {
		char err[128];
		if (nvme_disc_referral(w[1], w[2], err, sizeof(err)) < 0) {
			snprintf(reply, len, "err %s", err);
			return -1;
		}
		return 0;
	}
	if (!strcmp(w[0], "disc-port") && nw == 3 && !parse_num(w[1], TGT_MAX_PORTS, &v) && v &&
	    v <= T.nr_ports && (!strcmp(w[2], "hide") || !strcmp(w[2], "show"))) {
		nvme_disc_port_show((unsigned)v - 1, !strcmp(w[2], "show"));
		return 0;
	}
	if (!strcmp(w[0], "disc-referral-clear") && nw == 1) {
		nvme_disc_referrals_clear();
		return 0;
	}
	if (!strcmp(w[0], "ana-group") && (nw == 4 || (nw == 5 && !strcmp(w[4], "noaen")))) {
		unsigned long long nsid, grp;
		char err[128];
		if (parse_num(w[2], 0xffffffffu, &nsid) || parse_num(w[3], 0xffffffffu, &grp))
			goto bad;
		if (nvme_set_ana_group(w[1], (uint32_t)nsid, (uint32_t)grp, nw == 4, err,
				       sizeof(err)) < 0) {
			snprintf(reply, len, "err %s", err);
			return -1;
		}
		T.f.nr_injected++;
		return 0;
	}
	if (!strncmp(w[0], "ns-", 3))
		return ns_change_command(w, nw, reply, len);
	if (!strcmp(w[0], "dsm-noop") && nw == 2 && (!strcmp(w[1], "on") || !strcmp(w[1], "off"))) {
		T.f.dsm_noop = !strcmp(w[1], "on");
		return 0;
	}
	if (!strcmp(w[0], "abort-honour") && nw == 2 &&
	    (!strcmp(w[1], "on") || !strcmp(w[1], "off"))) {
		T.f.abort_honour = !strcmp(w[1], "on");
		log_notice("fault: Abort %s", T.f.abort_honour ? "honoured for delayed commands"
							       : "never honoured");
		return 0;
	}
	if (!strcmp(w[0], "rdy-stall") && nw == 2 &&
	    (!strcmp(w[1], "on") || !strcmp(w[1], "off"))) {
		T.f.rdy_stall = !strcmp(w[1], "on");
		log_notice("fault: CSTS after CC.EN %s", T.f.rdy_stall ? "not ready once, then unanswered"
								: "answered");
		return 0;
	}
	if (!strcmp(w[0], "lose-cache") && nw == 1) {
		nvme_lose_cache();
		T.f.nr_injected++;
		return 0;
	}
	if (!strcmp(w[0], "clear") && nw == 1) {
		T.f.drop_after = -1;
		T.f.delay_ms = 0;
		T.f.admin_delay_ms = 0;
		T.f.reorder_ms = 0;
		T.f.late_ms = 0;
		T.f.status = 0;
		T.f.status_nsid = 0;
		T.f.corrupt_hdgst = T.f.corrupt_ddgst = false;
		T.f.malformed = BAD_NONE;
		T.f.dsm_noop = false;
		T.f.abort_honour = false;
		T.f.rdy_stall = false;
		return 0;
	}
	if (!strcmp(w[0], "stats") && nw == 1) {
		unsigned conns = (unsigned)list_len(&T.conns), ctrls = (unsigned)list_len(&T.ctrls);
		size_t o = (size_t)snprintf(reply, len,
					    "ok conns=%u ctrls=%u connections=%llu commands=%llu "
					    "injected=%llu wz_deac=%llu wz_nodeac=%llu "
					    "abort_cmds=%llu aborted=%llu",
					    conns, ctrls, (unsigned long long)T.nr_conns_total,
					    (unsigned long long)T.nr_cmds_total,
					    (unsigned long long)T.f.nr_injected,
					    (unsigned long long)T.f.nr_wz_deac,
					    (unsigned long long)T.f.nr_wz_nodeac,
					    (unsigned long long)T.f.nr_abort_cmds,
					    (unsigned long long)T.f.nr_aborted);
		/* Per port: which path carried the I/O. */
		for (unsigned i = 0; i < T.nr_ports && o < len; i++)
			o += (size_t)snprintf(reply + o, len - o, " port%u_io=%llu", i + 1,
					      (unsigned long long)T.ports[i].nr_io_cmds);
		return 0;
	}
	/* Events for one port's controllers held back, as a controller
	 * whose event is late: the others' events go out meanwhile. */
	if (!strcmp(w[0], "aen-hold") && nw == 3 && !parse_num(w[1], TGT_MAX_PORTS, &v) && v &&
	    v <= T.nr_ports && (!strcmp(w[2], "on") || !strcmp(w[2], "off"))) {
		T.ports[v - 1].aen_hold = !strcmp(w[2], "on");
		log_notice("fault: events for port %llu %s", v,
			   T.ports[v - 1].aen_hold ? "held" : "released");
		if (!T.ports[v - 1].aen_hold)
			for (struct list_node *n = T.ctrls.next; n != &T.ctrls; n = n->next) {
				struct tgt_ctrl *c = container_of(n, struct tgt_ctrl, link);
				if (c->port == v - 1)
					nvme_aen_kick(c);
			}
		return 0;
	}
	if (!strcmp(w[0], "port") && nw == 3 && !parse_num(w[1], TGT_MAX_PORTS, &v) && v &&
	    v <= T.nr_ports && (!strcmp(w[2], "down") || !strcmp(w[2], "up"))) {
		struct tgt_port *p = &T.ports[v - 1];
		if (!strcmp(w[2], "up")) {
			p->down = false;
			if (!T.f.refuse_until_ns && tgt_listen_open() < 0) {
				snprintf(reply, len, "err cannot listen again");
				return -1;
			}
			log_notice("fault: port %llu up", v);
			return 0;
		}
		p->down = true;
		if (p->fd >= 0) {
			tgt_listen_close_one((unsigned)v - 1);
		}
		unsigned cnt = 0;
		for (bool again = true; again;) {
			again = false;
			for (struct list_node *n = T.conns.next; n != &T.conns; n = n->next) {
				struct tgt_conn *c = container_of(n, struct tgt_conn, link);
				if (c->port == v - 1) {
					/* Closing may take other connections off
					 * the list: start over. */
					conn_close(c, "port down");
					cnt++;
					again = true;
					break;
				}
			}
		}
		T.f.nr_injected++;
		log_notice("fault: port %llu down, %u connections dropped", v, cnt);
		return 0;
	}
bad:
	snprintf(reply, len,
		 "err unknown or malformed command; one of: ping | drop | drop-after N | "
		 "refuse SECS | delay MS | admin-delay MS | reorder MS | late MS | cqt MS | status SCT SC [dnr] [FRACTION] | status off | "
		 "corrupt hdgst|ddgst [io] | malformed type|hlen|cid|plen | "
		 "ana NQN NSID optimized|non-optimized|inaccessible|persistent-loss|change [PORT] [noaen] | "
		 "ana-group NQN NSID GRP [noaen] | "
		 "ns-resize NQN NSID SIZE | ns-remove|ns-add|ns-identity NQN NSID | "
		 "ns-format NQN NSID BLOCK (each [noaen]) | "
		 "disc-hide|disc-show NQN | disc-port N hide|show | disc-referral ADDR SVC | disc-referral-clear | "
		 "lose-cache | clear | stats | port N down|up | aen-hold N on|off | id-ns-fail N SC");
	return -1;
}

/* --NAME ARG on the command line is the control command "NAME ARG", with
 * colons in ARG standing for spaces (--status 0:0x80:dnr). */
int faults_option(const char *name, const char *arg)
{
	char line[512], reply[512];

	snprintf(line, sizeof(line), "%s %s", name, arg ? arg : "");
	for (char *p = line + strlen(name); *p; p++)
		if (*p == ':' && strcmp(name, "ana"))
			*p = ' ';
	if (faults_command(line, reply, sizeof(reply)) < 0) {
		fprintf(stderr, "nvmf-test-target: --%s %s: %s\n", name, arg ? arg : "", reply + 4);
		return -1;
	}
	return 0;
}
