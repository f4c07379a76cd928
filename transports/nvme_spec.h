/* NVMe, NVMe over Fabrics and NVMe/TCP wire structures.
 *
 * Little-endian on the wire; this code targets little-endian hosts only
 * (checked below) so the structures are used in place.  Every size and the
 * offsets the code relies on are asserted: a wrong layout must not build. */
#ifndef TRANSPORTS_NVME_SPEC_H
#define TRANSPORTS_NVME_SPEC_H

#include <stddef.h>
#include <stdint.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "nvmf-gateway uses wire structures in place: little-endian hosts only"
#endif

#define NVME_DISC_SUBSYS_NQN "nqn.2014-08.org.nvmexpress.discovery"
#define NVMF_NQN_SIZE 256
#define NVMF_NQN_MAX_LEN 223

/* ---- Submission and completion queue entries ---- */

struct nvme_sgl_desc {
	uint64_t addr;
	uint32_t length;
	uint8_t rsvd[3];
	uint8_t type; /* descriptor type << 4 | subtype */
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_sgl_desc) == 16, "sgl desc");

/* SGL type bytes used by the fabrics transports. */
enum {
	NVME_SGL_DATA_BLOCK_OFFSET = 0x01, /* in-capsule data, addr = offset */
	NVME_SGL_KEYED_DATA_BLOCK = 0x40, /* RDMA: addr, 3-byte length, key */
	NVME_SGL_KEYED_DATA_BLOCK_INV = 0x4F,
	NVME_SGL_TRANSPORT_DATA_BLOCK = 0x5A, /* TCP: data by R2T/C2HData */
};

/* Keyed SGL data block as laid out by RDMA (length is 24 bits). */
struct nvme_keyed_sgl_desc {
	uint64_t addr;
	uint8_t length[3];
	uint32_t key;
	uint8_t type;
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_keyed_sgl_desc) == 16, "keyed sgl desc");

#define NVME_CMD_FLAGS_SGL_METABUF 0x40 /* PSDT = 01b, required by fabrics */

struct nvme_sqe {
	uint8_t opcode;
	uint8_t flags;
	uint16_t cid;
	uint32_t nsid;
	uint32_t cdw2;
	uint32_t cdw3;
	uint64_t mptr;
	struct nvme_sgl_desc dptr;
	uint32_t cdw10;
	uint32_t cdw11;
	uint32_t cdw12;
	uint32_t cdw13;
	uint32_t cdw14;
	uint32_t cdw15;
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_sqe) == 64, "sqe");
_Static_assert(offsetof(struct nvme_sqe, dptr) == 24, "sqe dptr");
_Static_assert(offsetof(struct nvme_sqe, cdw10) == 40, "sqe cdw10");

struct nvme_cqe {
	union {
		uint64_t u64;
		struct {
			uint32_t dw0;
			uint32_t dw1;
		};
		uint16_t u16;
	} result;
	uint16_t sqhd;
	uint16_t sqid;
	uint16_t cid;
	uint16_t status; /* bit 0 = phase tag; 15:1 = status field */
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_cqe) == 16, "cqe");
_Static_assert(offsetof(struct nvme_cqe, cid) == 12, "cqe cid");

/* Status field helpers: the 15-bit field is cqe.status >> 1. */
#define NVME_STATUS_SC(s) ((s) & 0xff)
#define NVME_STATUS_SCT(s) (((s) >> 8) & 0x7)
#define NVME_STATUS_CRD(s) (((s) >> 11) & 0x3)
#define NVME_STATUS_MORE(s) (((s) >> 13) & 0x1)
#define NVME_STATUS_DNR(s) (((s) >> 14) & 0x1)

enum nvme_sct {
	NVME_SCT_GENERIC = 0,
	NVME_SCT_CMD_SPECIFIC = 1,
	NVME_SCT_MEDIA = 2,
	NVME_SCT_PATH = 3,
	NVME_SCT_VENDOR = 7,
};

/* ---- Opcodes ---- */

enum nvme_admin_opcode {
	NVME_ADMIN_GET_LOG_PAGE = 0x02,
	NVME_ADMIN_IDENTIFY = 0x06,
	NVME_ADMIN_ABORT = 0x08,
	NVME_ADMIN_SET_FEATURES = 0x09,
	NVME_ADMIN_GET_FEATURES = 0x0a,
	NVME_ADMIN_ASYNC_EVENT = 0x0c,
	NVME_ADMIN_KEEP_ALIVE = 0x18,
	NVME_FABRICS_COMMAND = 0x7f,
};

enum nvme_io_opcode {
	NVME_CMD_FLUSH = 0x00,
	NVME_CMD_WRITE = 0x01,
	NVME_CMD_READ = 0x02,
	NVME_CMD_WRITE_ZEROES = 0x08,
	NVME_CMD_DSM = 0x09,
};

#define NVME_RW_FUA (1u << 30) /* cdw12 */
#define NVME_WZ_DEAC (1u << 25) /* cdw12 of Write Zeroes */
#define NVME_DSM_ATTR_DEALLOCATE (1u << 2) /* cdw11 of DSM */

struct nvme_dsm_range {
	uint32_t cattr;
	uint32_t nlb;
	uint64_t slba;
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_dsm_range) == 16, "dsm range");

enum nvme_identify_cns {
	NVME_ID_CNS_NS = 0x00,
	NVME_ID_CNS_CTRL = 0x01,
	NVME_ID_CNS_NS_ACTIVE_LIST = 0x02,
	NVME_ID_CNS_NS_DESC_LIST = 0x03,
};

/* Namespace Identification Descriptor types (Identify CNS 03h). */
enum nvme_nidt {
	NVME_NIDT_EUI64 = 0x01,
	NVME_NIDT_NGUID = 0x02,
	NVME_NIDT_UUID = 0x03,
	NVME_NIDT_CSI = 0x04,
};

enum nvme_feature_id {
	NVME_FEAT_NUM_QUEUES = 0x07,
	NVME_FEAT_ASYNC_EVENT = 0x0b,
	NVME_FEAT_KATO = 0x0f,
};

enum nvme_log_page {
	NVME_LOG_CHANGED_NS = 0x04,
	NVME_LOG_ANA = 0x0c,
	NVME_LOG_DISCOVERY = 0x70,
};

/* ---- Asymmetric Namespace Access ---- */

enum nvme_ana_state {
	NVME_ANA_OPTIMIZED = 0x1,
	NVME_ANA_NON_OPTIMIZED = 0x2,
	NVME_ANA_INACCESSIBLE = 0x3,
	NVME_ANA_PERSISTENT_LOSS = 0x4,
	NVME_ANA_CHANGE = 0xf,
};

struct nvme_ana_log_hdr {
	uint64_t chgcnt;
	uint16_t ngrps;
	uint8_t rsvd10[6];
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_ana_log_hdr) == 16, "ana log header");

struct nvme_ana_group_desc {
	uint32_t grpid;
	uint32_t nnsids;
	uint64_t chgcnt;
	uint8_t state; /* bits 3:0 */
	uint8_t rsvd17[15];
	/* nnsids x uint32_t nsid follow */
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_ana_group_desc) == 32, "ana group descriptor");

/* Asynchronous Event Request completion dw0 and its configuration. */
#define NVME_AER_TYPE(dw0) ((dw0) & 0x7)
#define NVME_AER_INFO(dw0) (((dw0) >> 8) & 0xff)
#define NVME_AER_TYPE_NOTICE 0x2
#define NVME_AER_NOTICE_ANA_CHANGE 0x03
#define NVME_AEN_CFG_ANA_CHANGE (1u << 11)
#define NVME_CTRL_OAES_ANA_CHANGE (1u << 11)
/* Namespace Attribute Changed: a namespace was added, removed or resized;
 * the Changed Namespace List log (04h) says which (its first entry
 * 0xffffffff when more than 1024 changed), and reading it re-arms the
 * event on the target. */
#define NVME_AER_NOTICE_NS_CHANGED 0x00
#define NVME_AEN_CFG_NS_ATTR (1u << 8)
#define NVME_CTRL_OAES_NS_ATTR (1u << 8)
#define NVME_CHANGED_NS_OVERFLOW 0xffffffffu
#define NVME_CHANGED_NS_MAX 1024u

/* ---- Fabrics commands ---- */

enum nvmf_fctype {
	NVMF_FCTYPE_PROPERTY_SET = 0x00,
	NVMF_FCTYPE_CONNECT = 0x01,
	NVMF_FCTYPE_PROPERTY_GET = 0x04,
	NVMF_FCTYPE_AUTH_SEND = 0x05,
	NVMF_FCTYPE_AUTH_RECV = 0x06,
};

struct nvmf_connect_cmd {
	uint8_t opcode;
	uint8_t flags;
	uint16_t cid;
	uint8_t fctype;
	uint8_t rsvd1[19];
	struct nvme_sgl_desc dptr;
	uint16_t recfmt;
	uint16_t qid;
	uint16_t sqsize; /* 0's based */
	uint8_t cattr;
	uint8_t rsvd2;
	uint32_t kato; /* milliseconds */
	uint8_t rsvd3[12];
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_connect_cmd) == 64, "connect cmd");
_Static_assert(offsetof(struct nvmf_connect_cmd, recfmt) == 40, "recfmt");
_Static_assert(offsetof(struct nvmf_connect_cmd, kato) == 48, "kato");

struct nvmf_connect_data {
	uint8_t hostid[16];
	uint16_t cntlid;
	uint8_t rsvd1[238];
	char subsysnqn[NVMF_NQN_SIZE];
	char hostnqn[NVMF_NQN_SIZE];
	uint8_t rsvd2[256];
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_connect_data) == 1024, "connect data");
_Static_assert(offsetof(struct nvmf_connect_data, subsysnqn) == 256, "subnqn");
_Static_assert(offsetof(struct nvmf_connect_data, hostnqn) == 512, "hostnqn");

/* Connect command specific status codes (SCT 1). */
enum {
	NVMF_SC_CONNECT_INCOMPATIBLE_FORMAT = 0x80,
	NVMF_SC_CONNECT_CTRL_BUSY = 0x81,
	NVMF_SC_CONNECT_INVALID_PARAM = 0x82,
	NVMF_SC_CONNECT_RESTART_DISC = 0x83,
	NVMF_SC_CONNECT_INVALID_HOST = 0x84,
	NVMF_SC_AUTH_REQUIRED = 0x91,
};

/* Connect response dword 0 bits 17/18: the queue must authenticate
 * (ATR) or set up a secure channel (ASCR) before any other command. */
#define NVMF_CONNECT_AUTHREQ_ATR (1u << 17)
#define NVMF_CONNECT_AUTHREQ_ASCR (1u << 18)

/* ---- In-band authentication (TP 8006, base spec 2.0 section 8.13) ---- */

/* Authentication Send (tl) and Receive (al) share this layout. */
struct nvmf_auth_cmd {
	uint8_t opcode;
	uint8_t flags;
	uint16_t cid;
	uint8_t fctype;
	uint8_t rsvd1[19];
	struct nvme_sgl_desc dptr;
	uint8_t rsvd2;
	uint8_t spsp0;
	uint8_t spsp1;
	uint8_t secp;
	uint32_t len; /* TL for Send, AL for Receive */
	uint8_t rsvd3[16];
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_auth_cmd) == 64, "auth cmd");
_Static_assert(offsetof(struct nvmf_auth_cmd, spsp0) == 41, "spsp0");
_Static_assert(offsetof(struct nvmf_auth_cmd, len) == 44, "tl/al");

#define NVMF_AUTH_SECP_DHCHAP 0xe9

enum {
	NVMF_AUTH_COMMON_MESSAGES = 0x00,
	NVMF_AUTH_DHCHAP_MESSAGES = 0x01,
};

enum {
	NVMF_AUTH_MSG_NEGOTIATE = 0x00,
	NVMF_AUTH_MSG_CHALLENGE = 0x01,
	NVMF_AUTH_MSG_REPLY = 0x02,
	NVMF_AUTH_MSG_SUCCESS1 = 0x03,
	NVMF_AUTH_MSG_SUCCESS2 = 0x04,
	NVMF_AUTH_MSG_FAILURE2 = 0xf0,
	NVMF_AUTH_MSG_FAILURE1 = 0xf1,
};

#define NVMF_AUTH_ID_DHCHAP 0x01

enum nvmf_dhchap_hash {
	NVMF_DHCHAP_SHA256 = 0x01,
	NVMF_DHCHAP_SHA384 = 0x02,
	NVMF_DHCHAP_SHA512 = 0x03,
};

enum nvmf_dhchap_dhgroup {
	NVMF_DHCHAP_DH_NULL = 0x00,
	NVMF_DHCHAP_DH_2048 = 0x01,
	NVMF_DHCHAP_DH_3072 = 0x02,
	NVMF_DHCHAP_DH_4096 = 0x03,
	NVMF_DHCHAP_DH_6144 = 0x04,
	NVMF_DHCHAP_DH_8192 = 0x05,
};

/* Failure reason code explanations (rescode is always 1, "failed"). */
enum {
	NVMF_AUTH_FAIL_FAILED = 0x01,
	NVMF_AUTH_FAIL_NOT_USABLE = 0x02,
	NVMF_AUTH_FAIL_CONCAT_MISMATCH = 0x03,
	NVMF_AUTH_FAIL_HASH_UNUSABLE = 0x04,
	NVMF_AUTH_FAIL_DHGROUP_UNUSABLE = 0x05,
	NVMF_AUTH_FAIL_INCORRECT_PAYLOAD = 0x06,
	NVMF_AUTH_FAIL_INCORRECT_MESSAGE = 0x07,
};

struct nvmf_dhchap_protocol_desc {
	uint8_t authid;
	uint8_t rsvd;
	uint8_t halen;
	uint8_t dhlen;
	uint8_t idlist[60]; /* hash IDs at 0.., DH group IDs at 30.. */
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_dhchap_protocol_desc) == 64, "dhchap descriptor");

struct nvmf_auth_negotiate {
	uint8_t auth_type;
	uint8_t auth_id;
	uint16_t rsvd;
	uint16_t t_id;
	uint8_t sc_c;
	uint8_t napd;
	struct nvmf_dhchap_protocol_desc proto[1];
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_auth_negotiate) == 72, "negotiate");

/* The common head of every message the controller sends. */
struct nvmf_auth_hdr {
	uint8_t auth_type;
	uint8_t auth_id;
	uint16_t rsvd;
	uint16_t t_id;
} __attribute__((packed));

struct nvmf_auth_challenge {
	uint8_t auth_type;
	uint8_t auth_id;
	uint16_t rsvd1;
	uint16_t t_id;
	uint8_t hl;
	uint8_t rsvd2;
	uint8_t hashid;
	uint8_t dhgid;
	uint16_t dhvlen;
	uint32_t seqnum;
	/* hl bytes of challenge C1, then dhvlen bytes of the DH value */
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_auth_challenge) == 16, "challenge");

struct nvmf_auth_reply {
	uint8_t auth_type;
	uint8_t auth_id;
	uint16_t rsvd1;
	uint16_t t_id;
	uint8_t hl;
	uint8_t rsvd2;
	uint8_t cvalid;
	uint8_t rsvd3;
	uint16_t dhvlen;
	uint32_t seqnum;
	/* hl bytes of response, hl bytes of challenge C2, dhvlen of DH value */
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_auth_reply) == 16, "reply");

struct nvmf_auth_success1 {
	uint8_t auth_type;
	uint8_t auth_id;
	uint16_t rsvd1;
	uint16_t t_id;
	uint8_t hl;
	uint8_t rsvd2;
	uint8_t rvalid;
	uint8_t rsvd3[7];
	/* hl bytes of the controller's response when rvalid */
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_auth_success1) == 16, "success1");

struct nvmf_auth_success2 {
	uint8_t auth_type;
	uint8_t auth_id;
	uint16_t rsvd1;
	uint16_t t_id;
	uint8_t rsvd2[10];
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_auth_success2) == 16, "success2");

struct nvmf_auth_failure {
	uint8_t auth_type;
	uint8_t auth_id;
	uint16_t rsvd1;
	uint16_t t_id;
	uint8_t rescode;
	uint8_t rescode_exp;
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_auth_failure) == 8, "failure");

struct nvmf_property_cmd {
	uint8_t opcode;
	uint8_t flags;
	uint16_t cid;
	uint8_t fctype;
	uint8_t rsvd1[35];
	uint8_t attrib; /* bits 2:0: 0 = 4 bytes, 1 = 8 bytes */
	uint8_t rsvd2[3];
	uint32_t offset;
	uint64_t value;
	uint8_t rsvd3[8];
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_property_cmd) == 64, "property cmd");
_Static_assert(offsetof(struct nvmf_property_cmd, attrib) == 40, "attrib");
_Static_assert(offsetof(struct nvmf_property_cmd, offset) == 44, "offset");
_Static_assert(offsetof(struct nvmf_property_cmd, value) == 48, "value");

/* Controller properties (register offsets). */
enum {
	NVME_REG_CAP = 0x00,
	NVME_REG_VS = 0x08,
	NVME_REG_CC = 0x14,
	NVME_REG_CSTS = 0x1c,
};

#define NVME_CAP_MQES(cap) ((uint32_t)((cap) & 0xffff))
#define NVME_CAP_TO(cap) ((uint32_t)(((cap) >> 24) & 0xff)) /* 500 ms units */
#define NVME_CAP_MPSMIN(cap) ((uint32_t)(((cap) >> 48) & 0xf))

#define NVME_CC_EN (1u << 0)
#define NVME_CC_CSS_NVM (0u << 4)
#define NVME_CC_MPS(shift) ((uint32_t)((shift) - 12) << 7)
#define NVME_CC_SHN_NORMAL (1u << 14)
#define NVME_CC_SHN_MASK (3u << 14)
#define NVME_CC_IOSQES (6u << 16)
#define NVME_CC_IOCQES (4u << 20)

#define NVME_CSTS_RDY (1u << 0)
#define NVME_CSTS_CFS (1u << 1)
#define NVME_CSTS_SHST_MASK (3u << 2)
#define NVME_CSTS_SHST_CMPLT (2u << 2)

/* ---- Identify data (only the fields the gateway uses are named) ---- */

struct nvme_id_ctrl {
	uint16_t vid;
	uint16_t ssvid;
	char sn[20];
	char mn[40];
	char fr[8];
	uint8_t rab;
	uint8_t ieee[3];
	uint8_t cmic;
	uint8_t mdts;
	uint16_t cntlid;
	uint32_t ver;
	uint32_t rtd3r;
	uint32_t rtd3e;
	uint32_t oaes; /* 92: bit 11 = ANA change notices */
	uint32_t ctratt;
	uint8_t rsvd100[28];
	uint16_t crdt[3]; /* 128: command retry delay times, 100 ms units */
	uint8_t rsvd134[122];
	uint16_t oacs; /* 256 */
	uint8_t acl;
	uint8_t aerl;
	uint8_t frmw;
	uint8_t lpa;
	uint8_t elpe;
	uint8_t npss;
	uint8_t rsvd264[56];
	uint16_t kas; /* 320, in 100 ms units */
	uint8_t rsvd322[20];
	uint8_t anatt; /* 342 */
	uint8_t anacap; /* 343 */
	uint32_t anagrpmax; /* 344 */
	uint32_t nanagrpid; /* 348 */
	uint32_t pels; /* 352 */
	uint8_t rsvd356[30];
	uint16_t cqt; /* 386: Command Quiesce Time, ms (NVMe 2.1, TP4129) */
	uint8_t rsvd388[124];
	uint8_t sqes; /* 512 */
	uint8_t cqes;
	uint16_t maxcmd;
	uint32_t nn;
	uint16_t oncs; /* 520 */
	uint16_t fuses;
	uint8_t fna;
	uint8_t vwc; /* 525 */
	uint16_t awun;
	uint16_t awupf;
	uint8_t nvscc;
	uint8_t nwpc;
	uint16_t acwu;
	uint16_t rsvd534;
	uint32_t sgls; /* 536 */
	uint32_t mnan;
	uint8_t rsvd544[224];
	char subnqn[NVMF_NQN_SIZE]; /* 768 */
	uint8_t rsvd1024[768];
	uint32_t ioccsz; /* 1792, in 16-byte units, includes the SQE */
	uint32_t iorcsz;
	uint16_t icdoff;
	uint8_t fcatt;
	uint8_t msdbd;
	uint16_t ofcs;
	uint8_t rsvd1806[242];
	uint8_t psd[1024]; /* 2048 */
	uint8_t vs[1024];
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_id_ctrl) == 4096, "id ctrl");
_Static_assert(offsetof(struct nvme_id_ctrl, mdts) == 77, "mdts");
_Static_assert(offsetof(struct nvme_id_ctrl, oacs) == 256, "oacs");
_Static_assert(offsetof(struct nvme_id_ctrl, kas) == 320, "kas");
_Static_assert(offsetof(struct nvme_id_ctrl, anatt) == 342, "anatt");
_Static_assert(offsetof(struct nvme_id_ctrl, oaes) == 92, "oaes");
_Static_assert(offsetof(struct nvme_id_ctrl, crdt) == 128, "crdt");
_Static_assert(offsetof(struct nvme_id_ctrl, cqt) == 386, "cqt");
_Static_assert(offsetof(struct nvme_id_ctrl, anagrpmax) == 344, "anagrpmax");
_Static_assert(offsetof(struct nvme_id_ctrl, nanagrpid) == 348, "nanagrpid");
_Static_assert(offsetof(struct nvme_id_ctrl, sqes) == 512, "sqes");
_Static_assert(offsetof(struct nvme_id_ctrl, nn) == 516, "nn");
_Static_assert(offsetof(struct nvme_id_ctrl, oncs) == 520, "oncs");
_Static_assert(offsetof(struct nvme_id_ctrl, vwc) == 525, "vwc");
_Static_assert(offsetof(struct nvme_id_ctrl, sgls) == 536, "sgls");
_Static_assert(offsetof(struct nvme_id_ctrl, subnqn) == 768, "subnqn");
_Static_assert(offsetof(struct nvme_id_ctrl, ioccsz) == 1792, "ioccsz");
_Static_assert(offsetof(struct nvme_id_ctrl, msdbd) == 1803, "msdbd");

#define NVME_CTRL_ONCS_DSM (1u << 2)
#define NVME_CTRL_ONCS_WRITE_ZEROES (1u << 3)
#define NVME_CTRL_VWC_PRESENT (1u << 0)
#define NVME_CTRL_CMIC_ANA (1u << 3)

struct nvme_lbaf {
	uint16_t ms;
	uint8_t ds; /* log2 of the LBA data size */
	uint8_t rp;
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_lbaf) == 4, "lbaf");

struct nvme_id_ns {
	uint64_t nsze;
	uint64_t ncap;
	uint64_t nuse;
	uint8_t nsfeat;
	uint8_t nlbaf;
	uint8_t flbas;
	uint8_t mc;
	uint8_t dpc;
	uint8_t dps;
	uint8_t nmic;
	uint8_t rescap;
	uint8_t fpi;
	uint8_t dlfeat; /* 33 */
	uint16_t nawun;
	uint16_t nawupf;
	uint16_t nacwu;
	uint16_t nabsn;
	uint16_t nabo;
	uint16_t nabspf;
	uint16_t noiob;
	uint8_t nvmcap[16];
	uint16_t npwg; /* 64 */
	uint16_t npwa;
	uint16_t npdg;
	uint16_t npda;
	uint16_t nows;
	uint8_t rsvd74[18];
	uint32_t anagrpid; /* 92 */
	uint8_t rsvd96[3];
	uint8_t nsattr;
	uint16_t nvmsetid;
	uint16_t endgid;
	uint8_t nguid[16]; /* 104 */
	uint8_t eui64[8];
	struct nvme_lbaf lbaf[64]; /* 128 */
	uint8_t vs[3712];
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_id_ns) == 4096, "id ns");
_Static_assert(offsetof(struct nvme_id_ns, dlfeat) == 33, "dlfeat");
_Static_assert(offsetof(struct nvme_id_ns, npwg) == 64, "npwg");
_Static_assert(offsetof(struct nvme_id_ns, anagrpid) == 92, "anagrpid");
_Static_assert(offsetof(struct nvme_id_ns, nguid) == 104, "nguid");
_Static_assert(offsetof(struct nvme_id_ns, lbaf) == 128, "lbaf");

#define NVME_NS_FLBAS_INDEX(f) (((f) & 0xf) | ((((f) >> 5) & 0x3) << 4))
#define NVME_NS_NSFEAT_OPTPERF (1u << 4)

/* ---- Discovery log page ---- */

struct nvmf_disc_log_hdr {
	uint64_t genctr;
	uint64_t numrec;
	uint16_t recfmt;
	uint8_t rsvd[1006];
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_disc_log_hdr) == 1024, "disc log hdr");

struct nvmf_disc_log_entry {
	uint8_t trtype;
	uint8_t adrfam;
	uint8_t subtype;
	uint8_t treq;
	uint16_t portid;
	uint16_t cntlid;
	uint16_t asqsz;
	uint16_t eflags;
	uint8_t rsvd12[20];
	char trsvcid[32]; /* 32 */
	uint8_t rsvd64[192];
	char subnqn[NVMF_NQN_SIZE]; /* 256 */
	char traddr[256]; /* 512 */
	uint8_t tsas[256]; /* 768 */
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_disc_log_entry) == 1024, "disc entry");
_Static_assert(offsetof(struct nvmf_disc_log_entry, trsvcid) == 32, "trsvcid");
_Static_assert(offsetof(struct nvmf_disc_log_entry, subnqn) == 256, "subnqn");
_Static_assert(offsetof(struct nvmf_disc_log_entry, traddr) == 512, "traddr");

enum { NVMF_TRTYPE_RDMA = 1, NVMF_TRTYPE_FC = 2, NVMF_TRTYPE_TCP = 3,
       NVMF_TRTYPE_LOOP = 254 };
enum { NVMF_ADRFAM_IPV4 = 1, NVMF_ADRFAM_IPV6 = 2, NVMF_ADRFAM_IB = 3,
       NVMF_ADRFAM_FC = 4 };
enum { NVMF_SUBTYPE_DISCOVERY_REF = 1, NVMF_SUBTYPE_NVME = 2,
       NVMF_SUBTYPE_DISCOVERY_CUR = 3 };

/* ---- NVMe/TCP PDUs ---- */

enum nvme_tcp_pdu_type {
	NVME_TCP_ICREQ = 0x00,
	NVME_TCP_ICRESP = 0x01,
	NVME_TCP_H2C_TERM = 0x02,
	NVME_TCP_C2H_TERM = 0x03,
	NVME_TCP_CMD = 0x04,
	NVME_TCP_RSP = 0x05,
	NVME_TCP_H2C_DATA = 0x06,
	NVME_TCP_C2H_DATA = 0x07,
	NVME_TCP_R2T = 0x09,
};

enum {
	NVME_TCP_F_HDGST = 1u << 0,
	NVME_TCP_F_DDGST = 1u << 1,
	NVME_TCP_F_DATA_LAST = 1u << 2,
	NVME_TCP_F_DATA_SUCCESS = 1u << 3,
};

enum { NVME_TCP_DIGEST_HDR = 1u << 0, NVME_TCP_DIGEST_DATA = 1u << 1 };

/* Fatal error status of a TermReq. */
enum nvme_tcp_fes {
	NVME_TCP_FES_INVALID_PDU_HDR = 0x01,
	NVME_TCP_FES_PDU_SEQ_ERR = 0x02,
	NVME_TCP_FES_HDR_DIGEST_ERR = 0x03,
	NVME_TCP_FES_DATA_OUT_OF_RANGE = 0x04,
	NVME_TCP_FES_R2T_LIMIT_EXCEEDED = 0x05,
	NVME_TCP_FES_DATA_LIMIT_EXCEEDED = 0x05,
	NVME_TCP_FES_UNSUPPORTED_PARAM = 0x06,
};

struct nvme_tcp_hdr {
	uint8_t type;
	uint8_t flags;
	uint8_t hlen;
	uint8_t pdo;
	uint32_t plen;
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_tcp_hdr) == 8, "tcp ch");

struct nvme_tcp_icreq {
	struct nvme_tcp_hdr hdr;
	uint16_t pfv;
	uint8_t hpda;
	uint8_t digest;
	uint32_t maxr2t; /* 0's based */
	uint8_t rsvd[112];
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_tcp_icreq) == 128, "icreq");

struct nvme_tcp_icresp {
	struct nvme_tcp_hdr hdr;
	uint16_t pfv;
	uint8_t cpda;
	uint8_t digest;
	uint32_t maxdata; /* MAXH2CDATA, bytes */
	uint8_t rsvd[112];
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_tcp_icresp) == 128, "icresp");

struct nvme_tcp_term {
	struct nvme_tcp_hdr hdr;
	uint16_t fes;
	uint32_t fei;
	uint8_t rsvd[10];
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_tcp_term) == 24, "term");
#define NVME_TCP_TERM_MAX_DATA 128 /* offending header bytes echoed */

struct nvme_tcp_cmd {
	struct nvme_tcp_hdr hdr;
	struct nvme_sqe sqe;
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_tcp_cmd) == 72, "capsule cmd");

struct nvme_tcp_rsp {
	struct nvme_tcp_hdr hdr;
	struct nvme_cqe cqe;
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_tcp_rsp) == 24, "capsule resp");

/* H2CData, C2HData and R2T share one layout. */
struct nvme_tcp_data {
	struct nvme_tcp_hdr hdr;
	uint16_t cccid;
	uint16_t ttag; /* R2T and H2CData; reserved in C2HData */
	uint32_t offset; /* datao, or r2to */
	uint32_t length; /* datal, or r2tl */
	uint8_t rsvd[4];
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_tcp_data) == 24, "data pdu");
_Static_assert(offsetof(struct nvme_tcp_data, offset) == 12, "datao");

#define NVME_TCP_DIGEST_LEN 4
#define NVME_TCP_ADMIN_CCSZ 8192 /* in-capsule data every admin queue takes */
#define NVME_TCP_MAX_HLEN 128

/* ---- NVMe/RDMA: RDMA CM private data (RDMA transport binding) ---- */

#define NVME_RDMA_CM_FMT_1_0 0x0

/* Sent with rdma_connect().  hrqsize is 1's based, hsqsize 0's based. */
struct nvme_rdma_cm_req {
	uint16_t recfmt;
	uint16_t qid;
	uint16_t hrqsize;
	uint16_t hsqsize;
	uint16_t cntlid; /* I/O queues: the admin queue's controller ID */
	uint8_t rsvd[22];
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_rdma_cm_req) == 32, "rdma cm req");
_Static_assert(offsetof(struct nvme_rdma_cm_req, hsqsize) == 6, "rdma cm hsqsize");
_Static_assert(offsetof(struct nvme_rdma_cm_req, cntlid) == 8, "rdma cm cntlid");

/* The target's accept. */
struct nvme_rdma_cm_rep {
	uint16_t recfmt;
	uint16_t crqsize;
	uint8_t rsvd[28];
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_rdma_cm_rep) == 32, "rdma cm rep");

/* The target's reject (consumer-defined reject private data). */
struct nvme_rdma_cm_rej {
	uint16_t recfmt;
	uint16_t sts;
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_rdma_cm_rej) == 4, "rdma cm rej");

enum nvme_rdma_cm_status {
	NVME_RDMA_CM_INVALID_LEN = 0x01,
	NVME_RDMA_CM_INVALID_RECFMT = 0x02,
	NVME_RDMA_CM_INVALID_QID = 0x03,
	NVME_RDMA_CM_INVALID_HSQSIZE = 0x04,
	NVME_RDMA_CM_INVALID_HRQSIZE = 0x05,
	NVME_RDMA_CM_NO_RSC = 0x06,
	NVME_RDMA_CM_INVALID_IRD = 0x07,
	NVME_RDMA_CM_INVALID_ORD = 0x08,
	NVME_RDMA_CM_INVALID_CNTLID = 0x09,
};

#endif
