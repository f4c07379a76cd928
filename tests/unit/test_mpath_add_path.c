/* Paths added to a running multipath target (issue 19): the index each
 * gets, the MP_MAX_PATHS bound, an address given twice, and a path whose
 * discovery entry went away kept trying (its grace) rather than deleted.  No
 * connection is made: the target is shut down before its reactor runs the
 * connect timers. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gateway/base/reactor.h"
#include "gateway/volume/mpath.h"

static struct nvmf_path_opts path_at(unsigned port)
{
	struct nvmf_path_opts po;

	memset(&po, 0, sizeof(po));
	po.trtype = NVMF_TR_TCP;
	po.tos = -1;
	snprintf(po.traddr, sizeof(po.traddr), "127.0.0.1");
	snprintf(po.trsvcid, sizeof(po.trsvcid), "%u", port);
	return po;
}

static void shut(struct mp_target *t, int err, void *arg)
{
	(void)t;
	(void)err;
	*(int *)arg = 1;
}

START_TEST(add_until_full)
{
	struct reactor r, *rs[] = { &r };
	struct mp_target_opts o;
	struct mp_target *t;
	struct mp_path_info pi[MP_MAX_PATHS];
	int done = 0;

	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	memset(&o, 0, sizeof(o));
	snprintf(o.ctrl.name, sizeof(o.ctrl.name), "t");
	o.paths[0] = path_at(1);
	o.nr_paths = 1;
	o.reconnect_delay_ms = 1000;
	o.ctrl_loss_tmo_s = -1;
	o.fast_io_fail_tmo_s = -1;
	ck_assert_int_eq(mp_target_create(&o, rs, 1, &t), 0);

	struct nvmf_path_opts same = path_at(1);
	ck_assert_int_eq(mp_target_add_path(t, &same), -EEXIST);
	for (unsigned i = 1; i < MP_MAX_PATHS; i++) {
		struct nvmf_path_opts po = path_at(100 + i);
		ck_assert_int_eq(mp_target_add_path(t, &po), (int)i);
		ck_assert_int_eq(mp_target_find_path(t, &po), (int)i);
	}
	struct nvmf_path_opts extra = path_at(999);
	ck_assert_int_eq(mp_target_add_path(t, &extra), -ENOSPC);
	ck_assert_int_eq(mp_target_find_path(t, &extra), -ENOENT);
	ck_assert_uint_eq(mp_target_paths(t, pi, MP_MAX_PATHS), MP_MAX_PATHS);
	ck_assert_str_eq(pi[3].opts->trsvcid, "103");

	/* Unlisted while not connected (its first attempt not begun): it
	 * is not given up at once (the log may miss it for a moment), it
	 * keeps its attempt; listed again, it is tried as before. */
	mp_target_path_listed(t, 2, false);
	mp_target_paths(t, pi, MP_MAX_PATHS);
	ck_assert_int_ne(pi[2].state, NVMF_CTRL_DEAD);
	ck_assert_uint_ne(pi[2].next_attempt_ns, 0);
	ck_assert_int_ne(pi[3].state, NVMF_CTRL_DEAD);
	mp_target_path_listed(t, 2, true);
	mp_target_paths(t, pi, MP_MAX_PATHS);
	ck_assert_int_ne(pi[2].state, NVMF_CTRL_DEAD);
	ck_assert_uint_ne(pi[2].next_attempt_ns, 0);

	mp_target_shutdown(t, shut, &done);
	ck_assert_int_eq(done, 1);
	ck_assert_int_eq(mp_target_add_path(t, &extra), -ESHUTDOWN);
	reactor_poll(&r, 0); /* the snapshots sent meanwhile */
	mp_target_free(t);
	reactor_fini(&r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mpath_add_path");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, add_until_full);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
