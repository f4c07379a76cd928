/* Runs a command with io_uring_setup(2) failing, as a container runtime's
 * default seccomp profile makes it fail: EPERM, or the errno number in
 * NO_IO_URING_ERRNO.  Unlike the LD_PRELOAD shim (no_io_uring.c), the
 * kernel itself refuses, whatever library the program reaches it by.
 * Usage: seccomp_no_io_uring COMMAND [ARGS...] */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define THIS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_ARCH AUDIT_ARCH_AARCH64
#else
#error "seccomp_no_io_uring: add this architecture's AUDIT_ARCH"
#endif
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425 /* the same on every architecture */
#endif

int main(int argc, char **argv)
{
	const char *e = getenv("NO_IO_URING_ERRNO");
	unsigned err = e && *e ? (unsigned)atoi(e) : EPERM;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (argc < 2) {
		fprintf(stderr, "usage: %s COMMAND [ARGS...]\n", argv[0]);
		return 2;
	}
	/* Unprivileged filters need no_new_privs; the filter is inherited
	 * across execve and by every thread the command starts. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
		perror("seccomp_no_io_uring: seccomp");
		return 125;
	}
	execvp(argv[1], argv + 1);
	perror("seccomp_no_io_uring: exec");
	return 127;
}
