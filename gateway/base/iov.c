#include "gateway/base/iov.h"

#include <string.h>

size_t iov_length(const struct iovec *iov, unsigned cnt)
{
	size_t n = 0;
	for (unsigned i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

static unsigned iov_seek(const struct iovec *iov, unsigned cnt, size_t *off)
{
	unsigned i = 0;
	while (i < cnt && *off >= iov[i].iov_len) {
		*off -= iov[i].iov_len;
		i++;
	}
	return i;
}

void iov_copy_to(const struct iovec *iov, unsigned cnt, size_t off, const void *src,
		 size_t len)
{
	const unsigned char *s = src;
	for (unsigned i = iov_seek(iov, cnt, &off); i < cnt && len; i++, off = 0) {
		size_t n = iov[i].iov_len - off;
		if (n > len)
			n = len;
		memcpy((unsigned char *)iov[i].iov_base + off, s, n);
		s += n;
		len -= n;
	}
}

void iov_copy_from(const struct iovec *iov, unsigned cnt, size_t off, void *dst, size_t len)
{
	unsigned char *d = dst;
	for (unsigned i = iov_seek(iov, cnt, &off); i < cnt && len; i++, off = 0) {
		size_t n = iov[i].iov_len - off;
		if (n > len)
			n = len;
		memcpy(d, (const unsigned char *)iov[i].iov_base + off, n);
		d += n;
		len -= n;
	}
}

int iov_slice(const struct iovec *iov, unsigned cnt, size_t off, size_t len,
	      struct iovec *out, unsigned max)
{
	unsigned n = 0;
	for (unsigned i = iov_seek(iov, cnt, &off); len; i++, off = 0) {
		if (i >= cnt || n >= max)
			return -1;
		size_t l = iov[i].iov_len - off;
		if (l > len)
			l = len;
		out[n].iov_base = (unsigned char *)iov[i].iov_base + off;
		out[n].iov_len = l;
		n++;
		len -= l;
	}
	return (int)n;
}

unsigned iov_advance(struct iovec *iov, unsigned cnt, size_t n)
{
	unsigned i = 0;
	while (i < cnt && n) {
		size_t l = iov[i].iov_len < n ? iov[i].iov_len : n;
		iov[i].iov_base = (unsigned char *)iov[i].iov_base + l;
		iov[i].iov_len -= l;
		n -= l;
		if (iov[i].iov_len == 0)
			i++;
	}
	while (i < cnt && iov[i].iov_len == 0)
		i++;
	return i;
}
