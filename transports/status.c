#include "transports/status.h"

#include <errno.h>
#include <stdio.h>

#include "transports/nvme_spec.h"

struct status_entry {
	uint8_t sct;
	uint8_t sc;
	int err; /* positive errno */
	const char *name;
	/* Without DNR (DNR always fails now).  0 = NVME_DISP_RETRY, the
	 * default for a status the controller may answer differently next
	 * time. */
	enum nvme_disposition disp;
};

#define F NVME_DISP_FAIL
#define R NVME_DISP_RETRY
#define P NVME_DISP_FAILOVER
#define A NVME_DISP_ANA
#define X NVME_DISP_RESET

/* Where Linux's nvme_error_status() and the block layer agree on a meaning
 * we follow it; the rest is chosen so that NBD and FUSE clients see the
 * closest POSIX error (a write to a read-only namespace is EROFS, a full
 * namespace ENOSPC).
 *
 * The last column is what the host does without DNR.  Linux's
 * nvme_decide_disposition() retries everything without DNR and fails over
 * every path-related status; we do the same except where the answer is a
 * property of the command or the namespace that no retry changes (an
 * invalid opcode or field, an LBA out of range, write protection, a
 * reservation conflict): those fail at once (F).  Path-related statuses
 * other than ANA go to another path (P); the ANA ones wait for the ANA
 * state (A: the log is read again, the path is not used until it says
 * the group is usable again or a second has passed).  Keep Alive Timer
 * Expired means the controller already dropped this association: the
 * path is reset (X). */
static const struct status_entry status_table[] = {
	{ NVME_SCT_GENERIC, 0x00, 0, "Success", NVME_DISP_DONE },
	{ NVME_SCT_GENERIC, 0x01, EOPNOTSUPP, "Invalid Command Opcode", F },
	{ NVME_SCT_GENERIC, 0x02, EINVAL, "Invalid Field in Command", F },
	{ NVME_SCT_GENERIC, 0x03, EIO, "Command ID Conflict", R },
	{ NVME_SCT_GENERIC, 0x04, EIO, "Data Transfer Error", R },
	{ NVME_SCT_GENERIC, 0x05, EIO, "Commands Aborted due to Power Loss", R },
	{ NVME_SCT_GENERIC, 0x06, EIO, "Internal Error", R },
	{ NVME_SCT_GENERIC, 0x07, ECANCELED, "Command Abort Requested", R },
	{ NVME_SCT_GENERIC, 0x08, ECANCELED, "Command Aborted due to SQ Deletion", R },
	{ NVME_SCT_GENERIC, 0x0b, ENXIO, "Invalid Namespace or Format", F },
	{ NVME_SCT_GENERIC, 0x0c, EIO, "Command Sequence Error", R },
	{ NVME_SCT_GENERIC, 0x0d, EINVAL, "Invalid SGL Segment Descriptor", F },
	{ NVME_SCT_GENERIC, 0x0f, EINVAL, "Data SGL Length Invalid", F },
	{ NVME_SCT_GENERIC, 0x11, EINVAL, "SGL Descriptor Type Invalid", F },
	{ NVME_SCT_GENERIC, 0x15, EINVAL, "SGL Offset Invalid", F },
	{ NVME_SCT_GENERIC, 0x18, EBUSY, "Keep Alive Timer Expired", X },
	{ NVME_SCT_GENERIC, 0x1d, EIO, "Sanitize In Progress", R },
	{ NVME_SCT_GENERIC, 0x20, EROFS, "Namespace is Write Protected", F },
	{ NVME_SCT_GENERIC, 0x21, EINTR, "Command Interrupted", R },
	{ NVME_SCT_GENERIC, 0x22, EIO, "Transient Transport Error", R },
	{ NVME_SCT_GENERIC, 0x80, EINVAL, "LBA Out of Range", F },
	{ NVME_SCT_GENERIC, 0x81, ENOSPC, "Capacity Exceeded", F },
	{ NVME_SCT_GENERIC, 0x82, EAGAIN, "Namespace Not Ready", R },
	{ NVME_SCT_GENERIC, 0x83, EBADE, "Reservation Conflict", F },
	{ NVME_SCT_CMD_SPECIFIC, 0x01, EINVAL, "Invalid Queue Identifier", F },
	{ NVME_SCT_CMD_SPECIFIC, 0x02, EINVAL, "Invalid Queue Size", F },
	{ NVME_SCT_CMD_SPECIFIC, 0x05, EBUSY, "Asynchronous Event Request Limit Exceeded", R },
	{ NVME_SCT_CMD_SPECIFIC, 0x09, EINVAL, "Invalid Log Page", F },
	{ NVME_SCT_CMD_SPECIFIC, 0x0a, EINVAL, "Invalid Format", F },
	{ NVME_SCT_CMD_SPECIFIC, 0x0d, EINVAL, "Feature Identifier Not Saveable", F },
	{ NVME_SCT_CMD_SPECIFIC, 0x0e, EINVAL, "Feature Not Changeable", F },
	{ NVME_SCT_CMD_SPECIFIC, 0x80, EINVAL, "Conflicting Attributes", F },
	{ NVME_SCT_CMD_SPECIFIC, 0x81, EINVAL, "Invalid Protection Information", F },
	{ NVME_SCT_CMD_SPECIFIC, 0x82, EROFS, "Attempted Write to Read Only Range", F },
	{ NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_PARAM, EINVAL,
	  "Connect Invalid Parameters", F },
	{ NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_CTRL_BUSY, EBUSY, "Connect Controller Busy", R },
	{ NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_RESTART_DISC, EAGAIN,
	  "Connect Restart Discovery", R },
	{ NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_HOST, EACCES, "Connect Invalid Host", F },
	{ NVME_SCT_CMD_SPECIFIC, NVMF_SC_AUTH_REQUIRED, EACCES, "Authentication Required", F },
	{ NVME_SCT_MEDIA, 0x80, EIO, "Write Fault", R },
	{ NVME_SCT_MEDIA, 0x81, EIO, "Unrecovered Read Error", R },
	{ NVME_SCT_MEDIA, 0x82, EILSEQ, "End-to-end Guard Check Error", R },
	{ NVME_SCT_MEDIA, 0x83, EILSEQ, "End-to-end Application Tag Check Error", R },
	{ NVME_SCT_MEDIA, 0x84, EILSEQ, "End-to-end Reference Tag Check Error", R },
	{ NVME_SCT_MEDIA, 0x85, EIO, "Compare Failure", R },
	{ NVME_SCT_MEDIA, 0x86, EACCES, "Access Denied", F },
	{ NVME_SCT_MEDIA, 0x87, ENODATA, "Deallocated or Unwritten Logical Block", F },
	{ NVME_SCT_PATH, 0x00, EIO, "Internal Path Error", P },
	{ NVME_SCT_PATH, 0x01, ENOLINK, "Asymmetric Access Persistent Loss", A },
	{ NVME_SCT_PATH, 0x02, ENOLINK, "Asymmetric Access Inaccessible", A },
	{ NVME_SCT_PATH, 0x03, EAGAIN, "Asymmetric Access Transition", A },
	{ NVME_SCT_PATH, 0x60, EIO, "Controller Pathing Error", P },
	{ NVME_SCT_PATH, 0x70, EIO, "Host Pathing Error", P },
	{ NVME_SCT_PATH, 0x71, ECANCELED, "Command Aborted By Host", P },
};

#undef F
#undef R
#undef P
#undef A
#undef X

static const struct status_entry *status_lookup(uint16_t status)
{
	uint8_t sct = (uint8_t)NVME_STATUS_SCT(status), sc = (uint8_t)NVME_STATUS_SC(status);

	for (unsigned i = 0; i < sizeof(status_table) / sizeof(status_table[0]); i++)
		if (status_table[i].sct == sct && status_table[i].sc == sc)
			return &status_table[i];
	return NULL;
}

int nvme_status_to_errno(uint16_t status)
{
	const struct status_entry *e;

	if ((status & 0x7ff) == 0)
		return 0;
	e = status_lookup(status);
	return e ? -e->err : -EIO;
}

const char *nvme_status_str(uint16_t status)
{
	const struct status_entry *e = status_lookup(status);

	if (e)
		return e->name;
	switch (NVME_STATUS_SCT(status)) {
	case NVME_SCT_VENDOR:
		return "Vendor Specific Status";
	case NVME_SCT_PATH:
		return "Unknown Path Status";
	default:
		return "Unknown Status";
	}
}

const char *nvme_status_fmt(uint16_t status, char *buf, unsigned len)
{
	snprintf(buf, len, "%s (sct 0x%x sc 0x%02x%s)", nvme_status_str(status),
		 NVME_STATUS_SCT(status), NVME_STATUS_SC(status),
		 NVME_STATUS_DNR(status) ? ", dnr" : "");
	return buf;
}

enum nvme_disposition nvme_status_disposition(uint16_t status)
{
	const struct status_entry *e;

	if ((status & 0x7ff) == 0)
		return NVME_DISP_DONE;
	if (NVME_STATUS_DNR(status))
		return NVME_DISP_FAIL;
	if ((e = status_lookup(status)))
		return e->disp;
	/* Path-related status says nothing about the data: another path, or
	 * this one after its ANA state or connection changed, may succeed. */
	if (NVME_STATUS_SCT(status) == NVME_SCT_PATH)
		return NVME_DISP_FAILOVER;
	return NVME_DISP_RETRY;
}

const char *nvme_disposition_name(enum nvme_disposition d)
{
	static const char *const n[] = {
		[NVME_DISP_DONE] = "done",	   [NVME_DISP_RETRY] = "retry",
		[NVME_DISP_FAIL] = "fail",	   [NVME_DISP_FAILOVER] = "failover",
		[NVME_DISP_ANA] = "wait-for-ana", [NVME_DISP_RESET] = "reset",
	};
	return (unsigned)d < sizeof(n) / sizeof(n[0]) && n[d] ? n[d] : "?";
}

bool nvme_status_is_ana(uint16_t status)
{
	return NVME_STATUS_SCT(status) == NVME_SCT_PATH && NVME_STATUS_SC(status) >= 0x01 &&
	       NVME_STATUS_SC(status) <= 0x03;
}
