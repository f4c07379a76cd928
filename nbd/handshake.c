/* Fixed newstyle negotiation: the greeting, the client flags and the
 * options, up to NBD_OPT_GO / NBD_OPT_EXPORT_NAME.  Nothing here touches
 * a volume beyond reading its geometry: no I/O before an export is chosen. */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "gateway/base/log.h"
#include "nbd/internal.h"

static int put_reply(struct nbd_conn *c, uint32_t type, const void *data, uint32_t len)
{
	struct nbd_opt_reply h = {
		.magic = htobe64(NBD_OPT_REPLY_MAGIC),
		.option = htobe32(c->opt),
		.type = htobe32(type),
		.length = htobe32(len),
	};
	int ret = nbd_conn_hs_put(c, &h, sizeof(h));

	if (!ret && len)
		ret = nbd_conn_hs_put(c, data, len);
	if (ret)
		nbd_conn_fail(c, ret, "cannot queue an option reply: %s", strerror(-ret));
	return ret;
}

/* An error reply with a message for the human at the client. */
static int put_error(struct nbd_conn *c, uint32_t type, const char *msg)
{
	int ret = put_reply(c, type, msg, (uint32_t)strlen(msg));

	if (!ret)
		nbd_conn_tx_kick(c);
	return ret;
}

void nbd_hs_start(struct nbd_conn *c)
{
	struct nbd_greeting g = {
		.magic = htobe64(NBD_MAGIC),
		.ihaveopt = htobe64(NBD_IHAVEOPT),
		.flags = htobe16(NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES),
	};

	if (!nbd_conn_set_state(c, NBD_CONN_GREETING))
		return;
	reactor_timer_arm(c->r, &c->timer, NBD_HANDSHAKE_TIMEOUT_NS);
	if (nbd_conn_hs_put(c, &g, sizeof(g)) < 0) {
		nbd_conn_fail(c, -ENOMEM, "out of memory");
		return;
	}
	c->want = RX_CLIENT_FLAGS;
	nbd_conn_tx_kick(c);
}

int nbd_hs_client_flags(struct nbd_conn *c, const uint8_t *p)
{
	uint32_t flags;

	memcpy(&flags, p, 4);
	flags = be32toh(flags);
	if (flags & ~(uint32_t)(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
		nbd_conn_fail(c, -EPROTO, "unknown client flags 0x%x", flags);
		return -1;
	}
	c->no_zeroes = flags & NBD_FLAG_C_NO_ZEROES;
	nbd_conn_set_state(c, NBD_CONN_OPTIONS);
	c->want = RX_OPT_HDR;
	return 0;
}

static struct nbd_export *find_export(struct nbd_conn *c, const char *name, size_t len)
{
	if (!c->nr_exports)
		return NULL;
	if (len == 0)
		return c->exports[0];
	for (unsigned i = 0; i < c->nr_exports; i++) {
		const char *n = c->exports[i]->name ? c->exports[i]->name : "";
		if (strlen(n) == len && !memcmp(n, name, len))
			return c->exports[i];
	}
	return NULL;
}

int nbd_hs_opt_hdr(struct nbd_conn *c, const uint8_t *p)
{
	struct nbd_opt_hdr h;

	memcpy(&h, p, sizeof(h));
	if (be64toh(h.magic) != NBD_IHAVEOPT) {
		nbd_conn_fail(c, -EPROTO, "bad option magic 0x%llx",
			      (unsigned long long)be64toh(h.magic));
		return -1;
	}
	c->opt = be32toh(h.option);
	c->opt_len = be32toh(h.length);
	if (++c->nr_opts > NBD_MAX_OPTS) {
		nbd_conn_fail(c, -EPROTO, "more than %u options", NBD_MAX_OPTS);
		return -1;
	}
	if (c->opt_len > NBD_MAX_OPT_LEN) {
		if (c->opt_len > NBD_MAX_OPT_SKIP || c->opt == NBD_OPT_EXPORT_NAME) {
			nbd_conn_fail(c, -EPROTO, "option %u with %u bytes of data", c->opt,
				      c->opt_len);
			return -1;
		}
		c->skip_left = c->opt_len;
		c->want = RX_SKIP;
		return 0;
	}
	c->want = RX_OPT_DATA;
	if (c->opt_len == 0)
		return nbd_hs_opt_data(c, p);
	return 0;
}

void nbd_hs_opt_too_big(struct nbd_conn *c)
{
	log_rl(NOTICE, "nbd %s: option %u with %u bytes of data refused", c->peer, c->opt, c->opt_len);
	put_error(c, NBD_REP_ERR_TOO_BIG, "option data too long");
}

static int enter_transmission(struct nbd_conn *c, struct nbd_export *e)
{
	c->e = e;
	c->loss_start = c->loss_seen = c->loss_sent = vol_loss_sample(e->vol);
	c->loss_cursor = &c->loss_seen;
	c->tflags = nbd_conn_tflags(e, c->structured || c->extended);
	reactor_timer_cancel(&c->timer);
	if (!nbd_conn_set_state(c, NBD_CONN_TRANSMISSION))
		return -1;
	c->want = RX_REQ_HDR;
	log_info("nbd %s: export '%s' (%s%s)", c->peer, e->name ? e->name : "",
		 c->extended ? "extended headers" : c->structured ? "structured replies" :
							       "simple replies",
		 c->tflags & NBD_FLAG_READ_ONLY ? ", read-only" : "");
	return 0;
}

static int opt_export_name(struct nbd_conn *c, const uint8_t *p)
{
	static const uint8_t zeroes[124];
	struct nbd_export *e = find_export(c, (const char *)p, c->opt_len);
	struct nbd_export_name_reply r;

	if (!e) {
		char name[65];

		/* No way to answer an error here: the protocol says close. */
		log_printable(name, sizeof(name), p, c->opt_len);
		nbd_conn_fail(c, -ENOENT, "NBD_OPT_EXPORT_NAME: no export '%s'", name);
		return -1;
	}
	if (c->extended) {
		nbd_conn_fail(c, -EPROTO, "NBD_OPT_EXPORT_NAME after extended headers");
		return -1;
	}
	if (enter_transmission(c, e) < 0)
		return -1;
	r.size = htobe64(vol_size(e->vol));
	r.flags = htobe16(c->tflags);
	if (nbd_conn_hs_put(c, &r, sizeof(r)) ||
	    (!c->no_zeroes && nbd_conn_hs_put(c, zeroes, sizeof(zeroes)))) {
		nbd_conn_fail(c, -ENOMEM, "out of memory");
		return -1;
	}
	nbd_conn_tx_kick(c);
	return 0;
}

void nbd_block_sizes(const struct volume *v, uint32_t *min, uint32_t *pref, uint32_t *max)
{
	/* The protocol wants powers of two for min and preferred, preferred
	 * at least max(min, 512), and the maximum at least the preferred. */
	uint32_t p = v->pref_io > v->block_size ? v->pref_io : v->block_size;

	if (p < 512)
		p = 512;
	while (p & (p - 1))
		p &= p - 1;
	if (p < v->block_size)
		p = v->block_size;
	*min = v->block_size;
	*pref = p;
	*max = v->max_io > p ? v->max_io : p;
}

static int put_info(struct nbd_conn *c, uint16_t type, const void *head, size_t head_len,
		    const char *str)
{
	uint8_t buf[2 + 14 + NBD_MAX_STRING];
	size_t n = 2, sl = str ? strnlen(str, NBD_MAX_STRING) : 0;
	uint16_t t = htobe16(type);

	memcpy(buf, &t, 2);
	if (head_len)
		memcpy(buf + n, head, head_len);
	n += head_len;
	if (sl)
		memcpy(buf + n, str, sl);
	n += sl;
	return put_reply(c, NBD_REP_INFO, buf, (uint32_t)n);
}

static int opt_info_go(struct nbd_conn *c, const uint8_t *p)
{
	uint32_t namelen, len = c->opt_len;
	uint16_t nreq;
	bool want_name = false, want_desc = false;
	struct nbd_export *e;

	if (len < 6)
		return put_error(c, NBD_REP_ERR_INVALID, "option data too short");
	memcpy(&namelen, p, 4);
	namelen = be32toh(namelen);
	if (namelen > len - 6)
		return put_error(c, NBD_REP_ERR_INVALID, "export name longer than the option");
	if (namelen > NBD_MAX_STRING)
		return put_error(c, NBD_REP_ERR_TOO_BIG, "export name too long");
	memcpy(&nreq, p + 4 + namelen, 2);
	nreq = be16toh(nreq);
	if (len != 6 + namelen + 2u * nreq)
		return put_error(c, NBD_REP_ERR_INVALID, "information request list does not "
							 "match the option length");
	for (unsigned i = 0; i < nreq; i++) {
		uint16_t t;
		memcpy(&t, p + 6 + namelen + 2 * i, 2);
		t = be16toh(t);
		want_name |= t == NBD_INFO_NAME;
		want_desc |= t == NBD_INFO_DESCRIPTION;
	}
	e = find_export(c, (const char *)p + 4, namelen);
	if (!e)
		return put_error(c, NBD_REP_ERR_UNKNOWN, "no such export");

	struct volume *v = e->vol;
	uint16_t tflags = nbd_conn_tflags(e, c->structured || c->extended);
	uint8_t ex[10], bs[12];
	uint64_t size = htobe64(vol_size(v));
	uint16_t tf = htobe16(tflags);
	uint32_t bmin, bpref, bmax;
	nbd_block_sizes(v, &bmin, &bpref, &bmax);
	uint32_t min = htobe32(bmin), pref = htobe32(bpref), max = htobe32(bmax);

	memcpy(ex, &size, 8);
	memcpy(ex + 8, &tf, 2);
	memcpy(bs, &min, 4);
	memcpy(bs + 4, &pref, 4);
	memcpy(bs + 8, &max, 4);
	if (put_info(c, NBD_INFO_EXPORT, ex, sizeof(ex), NULL) ||
	    /* Always sent: the minimum is the LBA, which is not the default 1. */
	    put_info(c, NBD_INFO_BLOCK_SIZE, bs, sizeof(bs), NULL) ||
	    (want_name && put_info(c, NBD_INFO_NAME, NULL, 0, e->name ? e->name : "")) ||
	    (want_desc && e->description &&
	     put_info(c, NBD_INFO_DESCRIPTION, NULL, 0, e->description)) ||
	    put_reply(c, NBD_REP_ACK, NULL, 0))
		return -1;
	if (c->opt == NBD_OPT_GO && enter_transmission(c, e) < 0)
		return -1;
	nbd_conn_tx_kick(c);
	return 0;
}

static int opt_list(struct nbd_conn *c)
{
	uint8_t buf[4 + NBD_MAX_STRING];

	if (c->opt_len)
		return put_error(c, NBD_REP_ERR_INVALID, "NBD_OPT_LIST takes no data");
	for (unsigned i = 0; i < c->nr_exports; i++) {
		const char *n = c->exports[i]->name ? c->exports[i]->name : "";
		uint32_t l = (uint32_t)strnlen(n, NBD_MAX_STRING), bl = htobe32(l);
		memcpy(buf, &bl, 4);
		memcpy(buf + 4, n, l);
		if (put_reply(c, NBD_REP_SERVER, buf, 4 + l))
			return -1;
	}
	if (put_reply(c, NBD_REP_ACK, NULL, 0))
		return -1;
	nbd_conn_tx_kick(c);
	return 0;
}

static int opt_starttls(struct nbd_conn *c)
{
	if (nbd_tls_mode(c->tls_cfg) == NBD_TLS_OFF)
		return put_error(c, NBD_REP_ERR_UNSUP, "TLS is not configured on this server");
	if (c->opt_len)
		return put_error(c, NBD_REP_ERR_INVALID, "NBD_OPT_STARTTLS takes no data");
	if (c->tls)
		return put_error(c, NBD_REP_ERR_INVALID, "TLS is already on");
	/* Refused here, while the client still reads NBD replies, it can
	 * say why (after the ACK it could only see an EOF).  POLICY: the
	 * listener's tls_max_handshakes denies it now; SHUTDOWN would tell
	 * the client that the server is going away.  From then on this
	 * connection is held to tls = require: a client that merely allows
	 * TLS (libnbd's default) takes any error as "no TLS here" and would
	 * go on in plaintext, so whoever holds the slots could push other
	 * clients out of TLS.  It may ask again, or abort. */
	if (nbd_tls_slot_take(c) < 0) {
		c->tls_insist = true;
		return put_error(c, NBD_REP_ERR_POLICY,
				 "too many TLS handshakes in progress on this server; try again later");
	}
	if (put_reply(c, NBD_REP_ACK, NULL, 0))
		return -1;
	/* Nothing more is parsed in plaintext: the handshake starts once the
	 * ACK is sent (conn.c), and options go on inside TLS. */
	c->tls_starting = true;
	c->want = RX_NONE;
	nbd_conn_tx_kick(c);
	return -1;
}

static const char *opt_name(uint32_t opt)
{
	static const char *const names[] = {
		[NBD_OPT_EXPORT_NAME] = "EXPORT_NAME", [NBD_OPT_ABORT] = "ABORT",
		[NBD_OPT_LIST] = "LIST", [NBD_OPT_PEEK_EXPORT] = "PEEK_EXPORT",
		[NBD_OPT_STARTTLS] = "STARTTLS", [NBD_OPT_INFO] = "INFO", [NBD_OPT_GO] = "GO",
		[NBD_OPT_STRUCTURED_REPLY] = "STRUCTURED_REPLY",
		[NBD_OPT_LIST_META_CONTEXT] = "LIST_META_CONTEXT",
		[NBD_OPT_SET_META_CONTEXT] = "SET_META_CONTEXT",
		[NBD_OPT_EXTENDED_HEADERS] = "EXTENDED_HEADERS",
	};

	return opt < sizeof(names) / sizeof(names[0]) && names[opt] ? names[opt] : "unknown";
}

/* tls = require: before STARTTLS only STARTTLS and ABORT are answered. */
static bool tls_refused(struct nbd_conn *c)
{
	const char *why = c->tls_insist ? "its STARTTLS was refused" : "tls = require";

	if (c->tls || (nbd_tls_mode(c->tls_cfg) != NBD_TLS_REQUIRE && !c->tls_insist) ||
	    c->opt == NBD_OPT_STARTTLS || c->opt == NBD_OPT_ABORT)
		return false;
	if (c->opt == NBD_OPT_EXPORT_NAME) {
		/* No error reply exists for it: the protocol says close. */
		nbd_conn_fail(c, -EACCES, "NBD_OPT_EXPORT_NAME without TLS (%s)", why);
		return true;
	}
	log_rl(NOTICE, "nbd %s: option %u (%s) refused: TLS required (%s), the client did not get "
	       "through NBD_OPT_STARTTLS", c->peer, c->opt, opt_name(c->opt), why);
	put_error(c, NBD_REP_ERR_TLS_REQD, "TLS required: send NBD_OPT_STARTTLS first");
	return true;
}

int nbd_hs_opt_data(struct nbd_conn *c, const uint8_t *p)
{
	c->want = RX_OPT_HDR;
	if (c->tls_cfg && tls_refused(c))
		return c->state >= NBD_CONN_DRAINING ? -1 : 0;
	switch (c->opt) {
	case NBD_OPT_STARTTLS:
		return opt_starttls(c);
	case NBD_OPT_EXPORT_NAME:
		return opt_export_name(c, p);
	case NBD_OPT_ABORT:
		/* Data is ignored, as the protocol asks. */
		if (put_reply(c, NBD_REP_ACK, NULL, 0))
			return -1;
		nbd_conn_drain(c, 0, "client sent NBD_OPT_ABORT");
		return -1;
	case NBD_OPT_LIST:
		return opt_list(c);
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		return opt_info_go(c, p);
	case NBD_OPT_STRUCTURED_REPLY:
		if (c->opt_len)
			return put_error(c, NBD_REP_ERR_INVALID, "option takes no data");
		if (c->extended)
			return put_error(c, NBD_REP_ERR_EXT_HEADER_REQD,
					 "extended headers already negotiated");
		c->structured = true;
		break;
	case NBD_OPT_EXTENDED_HEADERS:
		if (c->opt_len)
			return put_error(c, NBD_REP_ERR_INVALID, "option takes no data");
		c->extended = true;
		break;
	default:
		return put_error(c, NBD_REP_ERR_UNSUP, "option not supported");
	}
	if (put_reply(c, NBD_REP_ACK, NULL, 0))
		return -1;
	nbd_conn_tx_kick(c);
	return 0;
}
