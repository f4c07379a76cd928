#include "log_capture.h"

#include <check.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

void log_capture_begin(struct log_capture *c)
{
	fflush(stderr);
	c->fd = memfd_create("log", 0);
	ck_assert_int_ge(c->fd, 0);
	c->saved = dup(2);
	ck_assert_int_ge(c->saved, 0);
	dup2(c->fd, 2);
}

size_t log_capture_end(struct log_capture *c, char *buf, size_t cap)
{
	ssize_t n;

	fflush(stderr);
	dup2(c->saved, 2);
	close(c->saved);
	n = pread(c->fd, buf, cap - 1, 0);
	close(c->fd);
	buf[n > 0 ? n : 0] = 0;
	return n > 0 ? (size_t)n : 0;
}
