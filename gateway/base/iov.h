/* Scatter-gather helpers shared by the transports and the exporters. */
#ifndef GW_IOV_H
#define GW_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Copy len bytes from src into the iovec at byte offset off. */
void iov_copy_to(const struct iovec *iov, unsigned cnt, size_t off, const void *src,
		 size_t len);
void iov_copy_from(const struct iovec *iov, unsigned cnt, size_t off, void *dst, size_t len);
/* The part [off, off+len) of iov as at most max entries in out; returns
 * the count, or -1 if it needs more than max entries or runs past the end. */
int iov_slice(const struct iovec *iov, unsigned cnt, size_t off, size_t len,
	      struct iovec *out, unsigned max);
size_t iov_length(const struct iovec *iov, unsigned cnt);
/* Drops n bytes from the front of the array in place; returns the index of
 * the first entry left (entries before it are empty). */
unsigned iov_advance(struct iovec *iov, unsigned cnt, size_t n);

#endif
