/*
 * Two costs that every user-space NVMe/TCP initiator pays of its own CPU,
 * measured on the machine it runs on (tests/bench/engine.sh runs it in the
 * guest): the floor under the `bench` way's CPU that the guest bound
 * ("could 1.5x the kernel host be reached at all") adds to what the rest
 * of the guest spends, where the zero-CPU bound adds nothing.
 *
 *   floor copy BYTES SECONDS   copying BYTES from one buffer of this
 *                              process to another, the cheapest of the C
 *                              library's memcpy, a bare `rep movsb` (the
 *                              guest kernel's copy to and from user memory
 *                              on a CPU with ERMS) and `rep movsq` (cheaper
 *                              under TCG than the kernel's own memcpy, 8-byte
 *                              moves, which copies a zerocopy send looped to
 *                              a local socket): in the ways considered (a
 *                              copy, a zerocopy send), a written or read
 *                              payload is copied at least once in a
 *                              user-space initiator whose target is on the
 *                              same machine (vmsplice tells no one when the
 *                              pages are free, README "Other benchmarks";
 *                              TCP_ZEROCOPY_RECEIVE's page remapping is not
 *                              measured)
 *   floor wait SECONDS         a thread that sleeps in one system call until
 *                              another thread wakes it, one round at a
 *                              time: the least a QD1 I/O of an initiator
 *                              that sleeps costs it besides its own work
 *                              (no send, no receive, no bookkeeping; the
 *                              command is handed over in shared memory as
 *                              to an SQPOLL thread).  The waker answers
 *                              after 300 us of its own, so that the waiter
 *                              is asleep when woken (the rounds in which it
 *                              was not are counted and printed).
 *
 * Only the measured thread's CPU is reported, by its own clock, over the
 * interval from the end of a warm-up to the stop.  Prints:
 *   copy BYTES ops=N cpu_us=C memcpy_us=M movsb_us=B movsq_us=Q
 *   wait 0 ops=N cpu_us=C slept=FRACTION
 * with C (the floor, per operation) the lowest of the three for copy.
 */
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TOOL_NAME "floor"
#include "tool.h"

#define WARMUP_NS 300000000ull
#define ANSWER_NS 300000ull
#define MAX_COPY (16u << 20)

static atomic_bool stopping;
static atomic_ullong ops, slept;
static clockid_t measured_clock;
static atomic_bool clock_set;

/* The pthread calls return their error instead of setting errno. */
static void check_pthread(int err, const char *what)
{
	if (err) {
		errno = err;
		die(what);
	}
}

static void own_clock(void)
{
	check_pthread(pthread_getcpuclockid(pthread_self(), &measured_clock), "pthread_getcpuclockid");
	atomic_store(&clock_set, true);
}

/* ---- copy ---- */

static size_t copy_len;
static atomic_int copy_way; /* 0 memcpy, 1 rep movsb, 2 rep movsq */

static void movsb(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
#else
	memcpy(dst, src, n);
#endif
}

/* BYTES rounded down to 8: a floor may copy less, never more. */
static void movsq(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	n /= 8;
	__asm__ volatile("rep movsq" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
#else
	memcpy(dst, src, n);
#endif
}

static void *copier(void *arg)
{
	char *src = malloc(copy_len), *dst = malloc(copy_len);

	(void)arg;
	if (!src || !dst)
		die("malloc");
	for (size_t i = 0; i < copy_len; i++)
		src[i] = (char)(i * 2654435761u >> 13);
	memset(dst, 0, copy_len);
	own_clock();
	while (!atomic_load(&stopping)) {
		switch (atomic_load(&copy_way)) {
		case 0:
			memcpy(dst, src, copy_len);
			break;
		case 1:
			movsb(dst, src, copy_len);
			break;
		default:
			movsq(dst, src, copy_len);
		}
		/* The copy is not dead code to the compiler. */
		__asm__ volatile("" : : "r"(dst) : "memory");
		atomic_fetch_add(&ops, 1);
	}
	free(src);
	free(dst);
	return NULL;
}

/* ---- wait ---- */

static _Atomic uint32_t asked, answered;
static atomic_bool waiter_done; /* the waker answers until the waiter has gone */

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

static void *waiter(void *arg)
{
	(void)arg;
	own_clock();
	for (uint32_t seq = 1; !atomic_load(&stopping); seq++) {
		bool did_sleep = false;

		atomic_store(&asked, seq);
		while (atomic_load(&answered) != seq) {
			if (futex(&answered, FUTEX_WAIT_PRIVATE, seq - 1) == 0)
				did_sleep = true;
			else if (errno != EAGAIN && errno != EINTR)
				die("futex wait");
		}
		if (did_sleep)
			atomic_fetch_add(&slept, 1);
		atomic_fetch_add(&ops, 1);
	}
	atomic_store(&waiter_done, true);
	return NULL;
}

static void *waker(void *arg)
{
	(void)arg;
	for (uint32_t seq = 1;; seq++) {
		while (atomic_load(&asked) != seq)
			if (atomic_load(&waiter_done))
				return NULL;
		uint64_t t = now_ns(CLOCK_MONOTONIC) + ANSWER_NS;
		while (now_ns(CLOCK_MONOTONIC) < t)
			;
		atomic_store(&answered, seq);
		if (futex(&answered, FUTEX_WAKE_PRIVATE, 1) < 0)
			die("futex wake");
	}
}

/* ---- the run ---- */

struct interval {
	unsigned long long ops, slept;
	uint64_t cpu;
};

static struct interval sample(void)
{
	return (struct interval){ atomic_load(&ops), atomic_load(&slept), now_ns(measured_clock) };
}

static void sleep_s(double secs)
{
	struct timespec ts = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };

	nanosleep(&ts, NULL);
}

/* CPU microseconds per operation over secs after a warm-up. */
static double measure(double secs, struct interval *d)
{
	struct timespec warm = { 0, WARMUP_NS };

	nanosleep(&warm, NULL);
	struct interval a = sample();
	sleep_s(secs);
	struct interval b = sample();
	d->ops = b.ops - a.ops;
	d->slept = b.slept - a.slept;
	d->cpu = b.cpu - a.cpu;
	if (!d->ops) {
		fprintf(stderr, "floor: no operation completed in %.1f s\n", secs);
		exit(1);
	}
	return (double)d->cpu / 1e3 / (double)d->ops;
}

static size_t size_arg(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *s == '-' || v > MAX_COPY)
		return 0;
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	if (*end || v == 0 || v > MAX_COPY)
		return 0;
	return (size_t)v;
}

/* Seconds, at most an hour (no overflow in the conversion to a timespec). */
static double secs_arg(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	return *end || !(v > 0 && v <= 3600) ? 0 : v;
}

int main(int argc, char **argv)
{
	pthread_t th[2];
	struct interval d;
	double secs;

	if (argc == 4 && !strcmp(argv[1], "copy") && (copy_len = size_arg(argv[2])) && (secs = secs_arg(argv[3])) > 0) {
		check_pthread(pthread_create(&th[0], NULL, copier, NULL), "pthread_create");
		while (!atomic_load(&clock_set))
			sched_yield();
		/* A third of the time each way, the same thread and buffers. */
		double us[3], low = 0;
		unsigned long long n = 0;
		for (int w = 0; w < 3; w++) {
			atomic_store(&copy_way, w);
			us[w] = measure(secs / 3, &d);
			n += d.ops;
			if (!w || us[w] < low)
				low = us[w];
		}
		atomic_store(&stopping, true);
		pthread_join(th[0], NULL);
		printf("copy %zu ops=%llu cpu_us=%.1f memcpy_us=%.1f movsb_us=%.1f movsq_us=%.1f\n", copy_len, n,
		       low, us[0], us[1], us[2]);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "wait") && (secs = secs_arg(argv[2])) > 0) {
		check_pthread(pthread_create(&th[1], NULL, waker, NULL), "pthread_create");
		check_pthread(pthread_create(&th[0], NULL, waiter, NULL), "pthread_create");
		while (!atomic_load(&clock_set))
			sched_yield();
		double c = measure(secs, &d);
		atomic_store(&stopping, true);
		for (int i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
		printf("wait 0 ops=%llu cpu_us=%.1f slept=%.2f\n", d.ops, c, (double)d.slept / (double)d.ops);
		return 0;
	}
	fprintf(stderr, "usage: floor copy BYTES SECONDS | floor wait SECONDS\n"
			"       (BYTES: 1 to 16M, k suffix allowed; SECONDS: up to 3600)\n");
	return 2;
}
