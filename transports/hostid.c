/* Host identity, found the way nvme-cli finds it so that the gateway and
 * the kernel host on one machine present the same host to a target. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "transports/ctrl.h"

#define UUID_NQN_PREFIX "nqn.2014-08.org.nvmexpress:uuid:"

int nvmf_uuid_parse(const char *s, uint8_t out[16])
{
	unsigned n = 0;

	for (const char *p = s; *p && n < 32; p++) {
		if (*p == '-')
			continue;
		if (!isxdigit((unsigned char)*p))
			return -EINVAL;
		unsigned v = (unsigned)(isdigit((unsigned char)*p) ? *p - '0' :
								     (tolower((unsigned char)*p) - 'a' + 10));
		if (n % 2 == 0)
			out[n / 2] = (uint8_t)(v << 4);
		else
			out[n / 2] |= (uint8_t)v;
		n++;
	}
	return n == 32 && strlen(s) == 36 ? 0 : -EINVAL;
}

void nvmf_uuid_format(const uint8_t u[16], char out[37])
{
	snprintf(out, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
		 u[14], u[15]);
}

/* First line of a file, trimmed; -errno if missing or empty. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -ENODATA;
	}
	fclose(f);
	size_t n = strlen(buf);
	while (n && isspace((unsigned char)buf[n - 1]))
		buf[--n] = 0;
	return n ? 0 : -ENODATA;
}

static int random_uuid(uint8_t u[16])
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t r = read(fd, u, 16);
	close(fd);
	if (r != 16)
		return -EIO;
	u[6] = (uint8_t)((u[6] & 0x0f) | 0x40); /* version 4 */
	u[8] = (uint8_t)((u[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	return 0;
}

/* Stored under state_dir so that a target's allowed-hosts list keeps
 * matching after a restart. */
static void store(const char *state_dir, const char *name, const char *val)
{
	char path[4096];
	FILE *f;

	if (mkdir(state_dir, 0755) < 0 && errno != EEXIST) {
		log_warn("cannot create state directory %s (%s): host %s will change on restart",
			 state_dir, strerror(errno), name);
		return;
	}
	snprintf(path, sizeof(path), "%s/%s", state_dir, name);
	f = fopen(path, "we");
	if (!f || fprintf(f, "%s\n", val) < 0 || fclose(f) != 0) {
		log_warn("cannot store %s (%s): host %s will change on restart", path,
			 strerror(errno), name);
		if (f)
			fclose(f);
	}
}

int nvmf_host_identity(const char *hostnqn_opt, const char *hostid_opt, const char *state_dir,
		       char hostnqn[NVMF_NQN_SIZE], uint8_t hostid[16])
{
	return nvmf_host_identity_at("/etc/nvme", hostnqn_opt, hostid_opt, state_dir, hostnqn,
				     hostid);
}

int nvmf_host_identity_at(const char *nvme_dir, const char *hostnqn_opt, const char *hostid_opt,
			  const char *state_dir, char hostnqn[NVMF_NQN_SIZE], uint8_t hostid[16])
{
	char path[4096], buf[NVMF_NQN_SIZE + 2], idstr[37];
	int ret;

	if (!state_dir)
		state_dir = getenv("NVMF_GATEWAY_STATE_DIR");
	if (!state_dir)
		state_dir = "/var/lib/nvmf-gateway";

	snprintf(path, sizeof(path), "%s/hostnqn", nvme_dir);
	if (hostnqn_opt) {
		snprintf(buf, sizeof(buf), "%s", hostnqn_opt);
	} else if (read_line(path, buf, sizeof(buf)) < 0) {
		snprintf(path, sizeof(path), "%s/hostnqn", state_dir);
		if (read_line(path, buf, sizeof(buf)) < 0) {
			uint8_t u[16];
			if ((ret = random_uuid(u)) < 0)
				return ret;
			nvmf_uuid_format(u, idstr);
			snprintf(buf, sizeof(buf), UUID_NQN_PREFIX "%s", idstr);
			store(state_dir, "hostnqn", buf);
		}
	}
	if (strlen(buf) > NVMF_NQN_MAX_LEN || strncmp(buf, "nqn.", 4) != 0) {
		log_err("host NQN '%s' is not a valid NQN (nqn.*, at most %d bytes)", buf,
			NVMF_NQN_MAX_LEN);
		return -EINVAL;
	}
	memcpy(hostnqn, buf, strlen(buf) + 1); /* length checked above */

	if (hostid_opt) {
		if (nvmf_uuid_parse(hostid_opt, hostid) < 0) {
			log_err("host ID '%s' is not a UUID", hostid_opt);
			return -EINVAL;
		}
		return 0;
	}
	snprintf(path, sizeof(path), "%s/hostid", nvme_dir);
	if (read_line(path, buf, sizeof(buf)) == 0 && nvmf_uuid_parse(buf, hostid) == 0)
		return 0;
	/* A UUID-form host NQN carries its host ID, as nvme-cli derives it. */
	if (strncmp(hostnqn, UUID_NQN_PREFIX, strlen(UUID_NQN_PREFIX)) == 0 &&
	    nvmf_uuid_parse(hostnqn + strlen(UUID_NQN_PREFIX), hostid) == 0)
		return 0;
	snprintf(path, sizeof(path), "%s/hostid", state_dir);
	if (read_line(path, buf, sizeof(buf)) == 0 && nvmf_uuid_parse(buf, hostid) == 0)
		return 0;
	if ((ret = random_uuid(hostid)) < 0)
		return ret;
	nvmf_uuid_format(hostid, idstr);
	store(state_dir, "hostid", idstr);
	return 0;
}
