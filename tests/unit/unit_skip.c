#include "unit_skip.h"

#include <errno.h>
#ifndef GW_NO_IO_URING
#include <liburing.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void unit_need_io_uring(void)
{
#ifdef GW_NO_IO_URING
	/* Built without liburing: the reactors run on epoll, which needs
	 * nothing the kernel may refuse. */
#else
	struct io_uring ring;
	int ret;

	/* The same library entry the reactor uses, so a refusal here is the
	 * refusal reactor_init() would meet. */
	ret = io_uring_queue_init(2, &ring, 0);
	if (ret == 0) {
		io_uring_queue_exit(&ring);
		return;
	}
	if (ret == -ENOSYS || ret == -EPERM || ret == -EACCES) {
		printf("io_uring is unavailable on this host (%s)\n", strerror(-ret));
		fflush(stdout);
		exit(UNIT_EXIT_SKIP);
	}
#endif
}
