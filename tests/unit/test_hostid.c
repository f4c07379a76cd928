/* Host identity resolution (transports/hostid.c): explicit values, then
 * nvme-cli's files, then a generated identity kept in the state folder.
 * Every case runs in its own temporary folders, never the machine's
 * /etc/nvme. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transports/ctrl.h"

#define UUID_NQN "nqn.2014-08.org.nvmexpress:uuid:"
#define ETC_NQN "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-4333-8444-555555555555"
#define ETC_ID "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"

static char root[64], etc_dir[128], state_dir[128];
static char nqn[NVMF_NQN_SIZE];
static uint8_t id[16];

static void put_file(const char *dir, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static bool read_file(const char *dir, const char *name, char *buf, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return false;
	bool ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return ok;
}

static void setup(void)
{
	strcpy(root, "/tmp/test_hostid.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(etc_dir, sizeof(etc_dir), "%s/etc-nvme", root);
	snprintf(state_dir, sizeof(state_dir), "%s/state", root);
	ck_assert_int_eq(mkdir(etc_dir, 0755), 0);
	memset(nqn, 0, sizeof(nqn));
	memset(id, 0, sizeof(id));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

static void id_str(char out[37]) { nvmf_uuid_format(id, out); }

START_TEST(explicit_wins)
{
	char s[37];

	put_file(etc_dir, "hostnqn", ETC_NQN "\n");
	put_file(etc_dir, "hostid", ETC_ID "\n");
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, "nqn.2024-01.io.example:host1",
					       "01234567-89ab-4def-8123-456789abcdef", state_dir,
					       nqn, id),
			 0);
	ck_assert_str_eq(nqn, "nqn.2024-01.io.example:host1");
	id_str(s);
	ck_assert_str_eq(s, "01234567-89ab-4def-8123-456789abcdef");
	/* Explicit values are not stored anywhere. */
	ck_assert_int_ne(access(state_dir, F_OK), 0);
}
END_TEST

START_TEST(etc_files_next)
{
	char s[37];

	put_file(etc_dir, "hostnqn", ETC_NQN "\n");
	put_file(etc_dir, "hostid", ETC_ID "\n");
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, NULL, NULL, state_dir, nqn, id), 0);
	ck_assert_str_eq(nqn, ETC_NQN);
	id_str(s);
	ck_assert_str_eq(s, ETC_ID);
}
END_TEST

START_TEST(etc_files_trimmed)
{
	char s[37];

	put_file(etc_dir, "hostnqn", ETC_NQN " \r\n");
	put_file(etc_dir, "hostid", ETC_ID "\t\n");
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, NULL, NULL, state_dir, nqn, id), 0);
	ck_assert_str_eq(nqn, ETC_NQN);
	id_str(s);
	ck_assert_str_eq(s, ETC_ID);
	ck_assert_int_ne(access(state_dir, F_OK), 0);
}
END_TEST

/* Explicit NQN, host ID from the file: each is resolved on its own. */
START_TEST(mixed_sources)
{
	char s[37];

	put_file(etc_dir, "hostnqn", ETC_NQN "\n");
	put_file(etc_dir, "hostid", ETC_ID "\n");
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, "nqn.2024-01.io.example:h", NULL,
					       state_dir, nqn, id),
			 0);
	ck_assert_str_eq(nqn, "nqn.2024-01.io.example:h");
	id_str(s);
	ck_assert_str_eq(s, ETC_ID);
}
END_TEST

/* No hostid file: a UUID-form NQN carries the host ID, as with nvme-cli. */
START_TEST(hostid_from_uuid_nqn)
{
	char s[37];

	put_file(etc_dir, "hostnqn", ETC_NQN "\n");
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, NULL, NULL, state_dir, nqn, id), 0);
	ck_assert_str_eq(nqn, ETC_NQN);
	id_str(s);
	ck_assert_str_eq(s, "11111111-2222-4333-8444-555555555555");
}
END_TEST

/* A malformed hostid file is not used. */
START_TEST(bad_etc_hostid_ignored)
{
	char s[37];

	put_file(etc_dir, "hostnqn", ETC_NQN "\n");
	put_file(etc_dir, "hostid", "not-a-uuid\n");
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, NULL, NULL, state_dir, nqn, id), 0);
	id_str(s);
	ck_assert_str_eq(s, "11111111-2222-4333-8444-555555555555");
}
END_TEST

START_TEST(generated_is_stable)
{
	char nqn2[NVMF_NQN_SIZE], s[37], s2[37], stored[300];
	uint8_t id2[16];

	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, NULL, NULL, state_dir, nqn, id), 0);
	ck_assert_int_eq(strncmp(nqn, UUID_NQN, strlen(UUID_NQN)), 0);
	ck_assert_uint_eq(strlen(nqn), strlen(UUID_NQN) + 36);
	uint8_t u[16];
	ck_assert_int_eq(nvmf_uuid_parse(nqn + strlen(UUID_NQN), u), 0);
	ck_assert_uint_eq(u[6] >> 4, 4); /* version 4 */
	ck_assert_uint_eq(u[8] >> 6, 2); /* RFC 4122 variant */
	/* The host ID is the NQN's UUID. */
	id_str(s);
	ck_assert_str_eq(s, nqn + strlen(UUID_NQN));
	ck_assert(read_file(state_dir, "hostnqn", stored, sizeof(stored)));
	ck_assert_str_eq(stored, nqn);

	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, NULL, NULL, state_dir, nqn2, id2), 0);
	ck_assert_str_eq(nqn2, nqn);
	nvmf_uuid_format(id2, s2);
	ck_assert_str_eq(s2, s);

	/* Another state folder: another identity. */
	char other[160];
	snprintf(other, sizeof(other), "%s/other", root);
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, NULL, NULL, other, nqn2, id2), 0);
	ck_assert_str_ne(nqn2, nqn);
}
END_TEST

/* A host ID is generated and kept when nothing else gives one. */
START_TEST(generated_hostid_is_stable)
{
	char s[37], s2[37], stored[64];
	uint8_t id2[16];

	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, "nqn.2024-01.io.example:h", NULL,
					       state_dir, nqn, id),
			 0);
	id_str(s);
	ck_assert(read_file(state_dir, "hostid", stored, sizeof(stored)));
	ck_assert_str_eq(stored, s);
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, "nqn.2024-01.io.example:h", NULL,
					       state_dir, nqn, id2),
			 0);
	nvmf_uuid_format(id2, s2);
	ck_assert_str_eq(s2, s);
}
END_TEST

/* Files in /etc/nvme take precedence over what the state folder holds. */
START_TEST(etc_over_state)
{
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, NULL, NULL, state_dir, nqn, id), 0);
	ck_assert_str_ne(nqn, ETC_NQN);
	put_file(etc_dir, "hostnqn", ETC_NQN "\n");
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, NULL, NULL, state_dir, nqn, id), 0);
	ck_assert_str_eq(nqn, ETC_NQN);
}
END_TEST

START_TEST(bad_explicit_uuid_rejected)
{
	static const char *const bad[] = {
		"not-a-uuid",
		"01234567-89ab-4def-8123-456789abcde", /* one digit short */
		"01234567-89ab-4def-8123-456789abcdef0", /* one too many */
		"01234567-89ab-4def-8123-456789abcdeg", /* not hex */
		"0123456789ab4def8123456789abcdef", /* no dashes */
		"",
	};

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t u[16];
		ck_assert_int_eq(nvmf_uuid_parse(bad[i], u), -EINVAL);
		ck_assert_int_eq(nvmf_host_identity_at(etc_dir, "nqn.2024-01.io.example:h", bad[i],
						       state_dir, nqn, id),
				 -EINVAL);
	}
}
END_TEST

START_TEST(bad_nqn_rejected)
{
	char longnqn[300];

	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, "host1", NULL, state_dir, nqn, id),
			 -EINVAL);
	memset(longnqn, 'a', sizeof(longnqn) - 1);
	longnqn[sizeof(longnqn) - 1] = 0;
	memcpy(longnqn, "nqn.", 4);
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, longnqn, NULL, state_dir, nqn, id),
			 -EINVAL);
	put_file(etc_dir, "hostnqn", "garbage\n");
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, NULL, NULL, state_dir, nqn, id), -EINVAL);
}
END_TEST

START_TEST(uuid_round_trip)
{
	uint8_t u[16];
	char s[37];

	ck_assert_int_eq(nvmf_uuid_parse("01234567-89AB-4DEF-8123-456789ABCDEF", u), 0);
	ck_assert_uint_eq(u[0], 0x01);
	ck_assert_uint_eq(u[15], 0xef);
	nvmf_uuid_format(u, s);
	ck_assert_str_eq(s, "01234567-89ab-4def-8123-456789abcdef");
}
END_TEST

/* A state folder that cannot be created still gives an identity. */
START_TEST(unwritable_state_dir)
{
	char bad[160];

	put_file(root, "file", "x");
	snprintf(bad, sizeof(bad), "%s/file/state", root);
	ck_assert_int_eq(nvmf_host_identity_at(etc_dir, NULL, NULL, bad, nqn, id), 0);
	ck_assert_int_eq(strncmp(nqn, UUID_NQN, strlen(UUID_NQN)), 0);
}
END_TEST

static Suite *hostid_suite(void)
{
	Suite *s = suite_create("hostid");
	TCase *tc = tcase_create("hostid");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, explicit_wins);
	tcase_add_test(tc, etc_files_next);
	tcase_add_test(tc, etc_files_trimmed);
	tcase_add_test(tc, mixed_sources);
	tcase_add_test(tc, hostid_from_uuid_nqn);
	tcase_add_test(tc, bad_etc_hostid_ignored);
	tcase_add_test(tc, generated_is_stable);
	tcase_add_test(tc, generated_hostid_is_stable);
	tcase_add_test(tc, etc_over_state);
	tcase_add_test(tc, bad_explicit_uuid_rejected);
	tcase_add_test(tc, bad_nqn_rejected);
	tcase_add_test(tc, uuid_round_trip);
	tcase_add_test(tc, unwritable_state_dir);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hostid_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
