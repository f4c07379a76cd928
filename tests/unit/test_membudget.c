#include "gateway/base/membudget.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/base/list.h"
#include "gateway/config.h"

#define MiB (1ull << 20)

START_TEST(takes_within_limit)
{
	struct membudget b;

	membudget_init(&b, 64 * MiB, 0);
	ck_assert(membudget_take(&b, 32 * MiB));
	ck_assert(membudget_take(&b, 32 * MiB));
	ck_assert(!membudget_take(&b, 4096));
	ck_assert_uint_eq(membudget_used(&b), 64 * MiB);
	membudget_give(&b, 32 * MiB);
	ck_assert(membudget_take(&b, 16 * MiB));
	ck_assert(!membudget_take(&b, 32 * MiB));
	ck_assert_uint_eq(membudget_used(&b), 48 * MiB);
	ck_assert_uint_eq(atomic_load(&b.peak), 64 * MiB);
}
END_TEST

/* FUSE cannot wait: its charge goes past the limit, and takers wait. */
START_TEST(charge_past_limit)
{
	struct membudget b;

	membudget_init(&b, 4 * MiB, 0);
	membudget_charge(&b, 3 * MiB);
	membudget_charge(&b, 3 * MiB);
	ck_assert_uint_eq(membudget_used(&b), 6 * MiB);
	ck_assert(!membudget_take(&b, 4096));
	membudget_give(&b, 3 * MiB);
	ck_assert(membudget_take(&b, 1 * MiB));
	ck_assert_uint_eq(atomic_load(&b.peak), 6 * MiB);
}
END_TEST

/* A budget below one request still makes progress: one at a time. */
START_TEST(smaller_than_one_request)
{
	struct membudget b;

	membudget_init(&b, 1 * MiB, 0);
	ck_assert(membudget_take(&b, 32 * MiB));
	ck_assert(!membudget_take(&b, 32 * MiB));
	ck_assert(!membudget_take(&b, 4096));
	membudget_give(&b, 32 * MiB);
	ck_assert_uint_eq(membudget_used(&b), 0);
	ck_assert(membudget_take(&b, 32 * MiB));
}
END_TEST

START_TEST(limit_floor_and_defaults)
{
	struct membudget b;

	membudget_init(&b, 4096, 0);
	ck_assert_uint_eq(b.limit, MEMBUDGET_MIN_BYTES);
	ck_assert_uint_eq(b.stall_ns, MEMBUDGET_DEFAULT_STALL_S * 1000000000ull);
	membudget_init(&b, 256 * MiB, 2);
	ck_assert_uint_eq(b.stall_ns, 2000000000ull);
	ck_assert_uint_eq(membudget_global()->limit, MEMBUDGET_DEFAULT_BYTES);
}
END_TEST

START_TEST(conn_cap)
{
	struct membudget b;

	membudget_init(&b, 256 * MiB, 0);
	ck_assert_uint_eq(membudget_conn_cap(&b, 32 * MiB), 64 * MiB);
	membudget_init(&b, 128 * MiB, 0);
	ck_assert_uint_eq(membudget_conn_cap(&b, 32 * MiB), 32 * MiB);
	membudget_init(&b, 16 * MiB, 0);
	ck_assert_uint_eq(membudget_conn_cap(&b, 32 * MiB), 32 * MiB);
	membudget_init(&b, 8ull << 30, 0);
	ck_assert_uint_eq(membudget_conn_cap(&b, 32 * MiB), 64 * MiB);
}
END_TEST

START_TEST(waiters_count)
{
	struct membudget b;

	membudget_init(&b, 8 * MiB, 0);
	ck_assert_uint_eq(membudget_waiters(&b), 0);
	membudget_wait_begin(&b);
	membudget_wait_begin(&b);
	ck_assert_uint_eq(membudget_waiters(&b), 2);
	membudget_wait_end(&b);
	ck_assert_uint_eq(membudget_waiters(&b), 1);
	ck_assert_uint_eq(atomic_load(&b.waits), 2);
}
END_TEST

/* I/O waiting for a path: its target's may hold a quarter of the budget,
 * all targets' half; nothing waiting, nothing bounded. */
START_TEST(path_wait_share)
{
	struct membudget b;

	membudget_init(&b, 64 * MiB, 0);
	ck_assert(!membudget_path_wait_over(&b, 0, 40 * MiB, 32 * MiB));
	ck_assert(!membudget_path_wait_over(&b, 4 * MiB, 4 * MiB, 12 * MiB));
	ck_assert(membudget_path_wait_over(&b, 4 * MiB, 4 * MiB, 12 * MiB + 4096));
	ck_assert(!membudget_path_wait_over(&b, 8 * MiB, 28 * MiB, 4 * MiB));
	ck_assert(membudget_path_wait_over(&b, 8 * MiB, 30 * MiB, 4 * MiB));
}
END_TEST

/* A waiter's begin tells every hook, on its own thread; a hook removed is
 * not called again. */
struct counted_hook {
	struct membudget_hook h;
	unsigned calls;
};

static void count_hook(struct membudget_hook *h)
{
	container_of(h, struct counted_hook, h)->calls++;
}

START_TEST(hooks_on_wait)
{
	struct membudget b;
	struct counted_hook x = { .h.fn = count_hook }, y = { .h.fn = count_hook };

	membudget_init(&b, 8 * MiB, 0);
	membudget_hook_add(&b, &x.h);
	membudget_hook_add(&b, &y.h);
	membudget_wait_begin(&b);
	ck_assert_uint_eq(x.calls, 1);
	ck_assert_uint_eq(y.calls, 1);
	membudget_wait_end(&b);
	membudget_hook_del(&b, &x.h);
	membudget_wait_begin(&b);
	ck_assert_uint_eq(x.calls, 1);
	ck_assert_uint_eq(y.calls, 2);
	membudget_hook_del(&b, &y.h);
	membudget_wait_begin(&b);
	ck_assert_uint_eq(y.calls, 2);
	ck_assert_uint_eq(membudget_waiters(&b), 2);
}
END_TEST

/* Threads take and give at random: never past the limit, all back at the
 * end. */
static struct membudget shared;
static _Atomic int over;

static void *hammer(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	uint64_t held[8] = { 0 };

	for (int i = 0; i < 200000; i++) {
		unsigned k = (unsigned)rand_r(&seed) % 8;
		if (held[k]) {
			membudget_give(&shared, held[k]);
			held[k] = 0;
		} else {
			uint64_t n = (1 + (unsigned)rand_r(&seed) % 64) * 65536;
			if (membudget_take(&shared, n)) {
				held[k] = n;
				if (membudget_used(&shared) > shared.limit)
					atomic_store(&over, 1);
			}
		}
	}
	for (unsigned k = 0; k < 8; k++)
		if (held[k])
			membudget_give(&shared, held[k]);
	return NULL;
}

START_TEST(threads_never_exceed)
{
	pthread_t t[4];

	membudget_init(&shared, 16 * MiB, 0);
	for (uintptr_t i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, hammer, (void *)(i + 1)), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	ck_assert_int_eq(atomic_load(&over), 0);
	ck_assert_uint_eq(membudget_used(&shared), 0);
	ck_assert_uint_le(atomic_load(&shared.peak), 16 * MiB);
}
END_TEST

/* The keys of "Memory and connections": defaults, values, refusals. */
static int load_text(const char *text, struct gw_config **cfg, char **errs)
{
	char path[] = "/tmp/membudget-conf.XXXXXX";
	int fd = mkstemp(path);
	size_t len;
	FILE *e = open_memstream(errs, &len);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (int)strlen(text));
	close(fd);
	int ret = config_load(path, cfg, e);
	fclose(e);
	unlink(path);
	return ret;
}

#define TARGET "targets = ( { name = \"t\"; subnqn = \"nqn.2014-08.org.example:t\"; " \
	"paths = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; } ); } );\n"

START_TEST(config_keys)
{
	struct gw_config *cfg = NULL;
	char *errs = NULL;

	ck_assert_int_eq(load_text(TARGET, &cfg, &errs), 0);
	ck_assert_uint_eq(cfg->buffer_budget, MEMBUDGET_DEFAULT_BYTES);
	ck_assert_int_eq(cfg->max_connections, 64);
	ck_assert_int_eq(cfg->stall_timeout, 30);
	config_free(cfg);
	free(errs);
	ck_assert_int_eq(load_text("gateway = { buffer_budget = \"1G\"; max_connections = 8; "
				   "stall_timeout = 5; };\n" TARGET
				   "exports = ( { name = \"e\"; target = \"t\"; nbd = { "
				   "listen = \"unix:/tmp/x.sock\"; max_connections = 3; }; } );\n",
				   &cfg, &errs), 0);
	ck_assert_uint_eq(cfg->buffer_budget, 1ull << 30);
	ck_assert_int_eq(cfg->max_connections, 8);
	ck_assert_int_eq(cfg->stall_timeout, 5);
	ck_assert_int_eq(cfg->exports[0].nbd.max_connections, 3);
	config_free(cfg);
	free(errs);
	ck_assert_int_eq(load_text("gateway = { buffer_budget = \"512K\"; };\n" TARGET, &cfg,
				   &errs), -EINVAL);
	ck_assert_msg(strstr(errs, "gateway.buffer_budget: invalid value \"512K\": at least 1M"),
		      "%s", errs);
	free(errs);
	ck_assert_int_eq(load_text("gateway = { max_connections = 0; };\n" TARGET, &cfg, &errs),
			 -EINVAL);
	free(errs);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("membudget");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, takes_within_limit);
	tcase_add_test(tc, smaller_than_one_request);
	tcase_add_test(tc, charge_past_limit);
	tcase_add_test(tc, limit_floor_and_defaults);
	tcase_add_test(tc, conn_cap);
	tcase_add_test(tc, waiters_count);
	tcase_add_test(tc, path_wait_share);
	tcase_add_test(tc, hooks_on_wait);
	tcase_add_test(tc, threads_never_exceed);
	tcase_add_test(tc, config_keys);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
