/* Runs a command with io_uring_setup(2) failing, as a container runtime's
 * default seccomp profile makes it fail: EPERM, or the errno number in
 * NO_IO_URING_ERRNO.  Unlike the LD_PRELOAD shim (no_io_uring.c), the
 * kernel itself refuses, whatever library the program reaches it by.
 * Usage: seccomp_no_io_uring COMMAND [ARGS...] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp_deny.h"

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425 /* the same on every architecture */
#endif

int main(int argc, char **argv)
{
	const char *e = getenv("NO_IO_URING_ERRNO");
	unsigned err = e && *e ? (unsigned)atoi(e) : EPERM;

	if (argc < 2) {
		fprintf(stderr, "usage: %s COMMAND [ARGS...]\n", argv[0]);
		return 2;
	}
	/* The filter is inherited across execve and by every thread the
	 * command starts. */
	if (seccomp_deny(__NR_io_uring_setup, err) < 0) {
		perror("seccomp_no_io_uring: seccomp");
		return 125;
	}
	execvp(argv[1], argv + 1);
	perror("seccomp_no_io_uring: exec");
	return 127;
}
