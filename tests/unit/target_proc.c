/* See target_proc.h. */
#include "target_proc.h"

#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* build/tests/unit/test_x -> build/nvmf-test-target */
void target_proc_start(struct target_proc *t, const char *dir_prefix, const char *subnqn,
		       bool control, const char *const *extra, unsigned guard_ms)
{
	char exe[PATH_MAX], bin[PATH_MAX + 32], ready[128], logf[128], ns[256];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	ck_assert_int_gt(n, 0);
	exe[n] = 0;
	for (int i = 0; i < 3; i++) {
		char *s = strrchr(exe, '/');
		ck_assert_ptr_nonnull(s);
		*s = 0;
	}
	snprintf(bin, sizeof(bin), "%s/nvmf-test-target", exe);
	ck_assert_msg(access(bin, X_OK) == 0, "%s: not built (make all)", bin);
	snprintf(t->dir, sizeof(t->dir), "/tmp/%s-XXXXXX", dir_prefix);
	ck_assert_ptr_nonnull(mkdtemp(t->dir));
	snprintf(ready, sizeof(ready), "%s/ready", t->dir);
	snprintf(logf, sizeof(logf), "%s/target.log", t->dir);
	snprintf(ns, sizeof(ns), "%s:16M", subnqn);
	t->pid = fork();
	ck_assert_int_ge(t->pid, 0);
	if (!t->pid) {
		/* Gone with the test case's process, whatever ends it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (!freopen(logf, "w", stderr) || !freopen(logf, "a", stdout))
			_exit(127);
		char ctl[128];
		snprintf(ctl, sizeof(ctl), "%s/ctl", t->dir);
		const char *argv[32] = { bin, "-a", "127.0.0.1", "-s", "0", "--subsys",
					 ns, "--ready-file", ready };
		unsigned i = 9;
		if (control) {
			argv[i++] = "--control";
			argv[i++] = ctl;
		}
		while (extra && *extra && i < 31)
			argv[i++] = *extra++;
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	for (unsigned ms = 0; ms < guard_ms; ms += 10) {
		FILE *f = fopen(ready, "r");
		if (f) {
			bool ok = fgets(t->port, sizeof(t->port), f);
			fclose(f);
			if (ok) {
				t->port[strcspn(t->port, "\n")] = 0;
				return;
			}
		}
		ck_assert_int_eq(waitpid(t->pid, NULL, WNOHANG), 0);
		usleep(10000);
	}
	ck_abort_msg("the test target did not start");
}

void target_proc_stop(struct target_proc *t)
{
	char p[128];

	kill(t->pid, SIGTERM);
	waitpid(t->pid, NULL, 0);
	static const char *const files[] = { "ready", "target.log", "ctl" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", t->dir, files[i]);
		unlink(p);
	}
	rmdir(t->dir);
}
