/* The in-tree test target (build/nvmf-test-target, next to the test's own
 * build folder) as a child of a unit test case: on 127.0.0.1 with an
 * ephemeral port, one 16 MiB subsystem, its log and ready file in a
 * temporary folder.  It dies with the test case's process, whatever ends
 * that. */
#ifndef NVMF_GATEWAY_TARGET_PROC_H
#define NVMF_GATEWAY_TARGET_PROC_H

#include <stdbool.h>
#include <sys/types.h>

struct target_proc {
	pid_t pid;
	char dir[64], port[16];
};

/* Starts it and waits (up to guard_ms) for its port; a failed start fails
 * the test case.  dir_prefix names the folder (/tmp/PREFIX-XXXXXX);
 * control adds --control DIR/ctl; extra is NULL or NULL-terminated
 * arguments appended. */
void target_proc_start(struct target_proc *t, const char *dir_prefix, const char *subnqn,
		       bool control, const char *const *extra, unsigned guard_ms);
/* SIGTERM, wait, and its folder removed. */
void target_proc_stop(struct target_proc *t);

#endif
