/* LD_PRELOAD shim for the tests of the skip paths: the host looks as if its
 * kernel refused io_uring (kernel.io_uring_disabled=2 answers EPERM; a
 * kernel without it, ENOSYS).  Set NO_IO_URING_ERRNO to pick; EPERM by
 * default.  Interposes liburing's setup entries, which the gateway and
 * the unit tests reach through the shared library. */
#include <errno.h>
#include <stdlib.h>

struct io_uring;
struct io_uring_params;

static int refusal(void)
{
	const char *e = getenv("NO_IO_URING_ERRNO");

	return e && *e ? -atoi(e) : -EPERM;
}

int io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
	(void)entries, (void)ring, (void)flags;
	return refusal();
}

int io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
			       struct io_uring_params *p)
{
	(void)entries, (void)ring, (void)p;
	return refusal();
}
