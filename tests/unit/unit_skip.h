/* Skipping a unit-test binary where the host cannot run it.
 *
 * Exit status 77 means "skipped" to tests/unit/run.sh, as it does to
 * tests/func/run.sh and to automake (liburing's tests call it T_EXIT_SKIP).
 * A skip is decided once, in main(), before Check forks its test cases: a
 * test case's own exit status only ever reaches Check as an error. */
#ifndef NVMF_GATEWAY_UNIT_SKIP_H
#define NVMF_GATEWAY_UNIT_SKIP_H

#define UNIT_EXIT_SKIP 77

/* Exits 77, naming the reason on stdout, when the kernel refuses io_uring
 * (missing: ENOSYS; disabled by kernel.io_uring_disabled or a seccomp
 * filter: EPERM/EACCES).  Any other setup error is left to the tests'
 * own reactor_init() asserts, which must then fail. */
void unit_need_io_uring(void);

#endif
