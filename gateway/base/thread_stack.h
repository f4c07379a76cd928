/* The stack of every thread the gateway starts (reactors, the NBD netlink
 * helper).  The default is RLIMIT_STACK (8 MiB), and under mlockall all of
 * it is resident.  Measured high water (bytes no longer zero at thread
 * exit, TLS included): 9 KiB on reactors over the func tests (NBD, FUSE,
 * multipath, reload, control, access, linkwatch), 9 KiB on the netlink
 * helper (test_nbd_kdev), 16 KiB for getaddrinfo through DNS plus an
 * OpenSSL 2048-bit modexp (DH-CHAP) on a thread.  256 KiB is 16 times the
 * deepest.  Sanitizers' frames are larger and unpredictable: they keep the
 * default. */
#ifndef GATEWAY_THREAD_STACK_H
#define GATEWAY_THREAD_STACK_H

#include <pthread.h>

#define GW_THREAD_STACK_SIZE (256u << 10)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GW_THREAD_STACK_DEFAULT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GW_THREAD_STACK_DEFAULT 1 /* clang */
#endif
#endif

/* 0 or a positive error number, as pthread_attr_setstacksize. */
static inline int gw_thread_stack(pthread_attr_t *attr)
{
#ifdef GW_THREAD_STACK_DEFAULT
	(void)attr;
	return 0;
#else
	return pthread_attr_setstacksize(attr, GW_THREAD_STACK_SIZE);
#endif
}

#endif
