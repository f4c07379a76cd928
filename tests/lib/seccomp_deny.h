/* A seccomp filter that makes one system call of this architecture fail
 * with an errno, as a container runtime's profile or a systemd unit's
 * SystemCallFilter= does, and lets every other through.  For the test
 * tools and unit tests that need the kernel itself to refuse. */
#ifndef TESTS_SECCOMP_DENY_H
#define TESTS_SECCOMP_DENY_H

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

#if defined(__x86_64__)
#define SECCOMP_DENY_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SECCOMP_DENY_ARCH AUDIT_ARCH_AARCH64
#else
#error "seccomp_deny.h: add this architecture's AUDIT_ARCH"
#endif

/* Installs the filter on the calling thread (inherited across execve and
 * by threads it starts later); sets no_new_privs, which an unprivileged
 * filter needs.  0, or -1 with errno set. */
static inline int seccomp_deny(unsigned nr, unsigned err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_DENY_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0 ? -1 : 0;
}

#endif
