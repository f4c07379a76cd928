#include "transports/crc32c.h"

#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define CRC32C_X86 1
#endif

#define CRC32C_POLY 0x82F63B78u

/* Slicing-by-8: table[k][b] is the register after b is followed by k zero
 * bytes, so eight bytes fold in with eight independent lookups. */
static uint32_t sw_table[8][256];
static bool hw_ok;
static uint32_t (*update_fn)(uint32_t, const void *, size_t) = crc32c_update_sw;

static uint64_t load_le64(const unsigned char *p)
{
	uint64_t w;

	/* memcpy, because the buffer alignment is the caller's, not ours. */
	memcpy(&w, p, sizeof(w));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	w = __builtin_bswap64(w);
#endif
	return w;
}

uint32_t crc32c_update_sw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	while (len && ((uintptr_t)p & 7)) {
		crc = sw_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	for (; len >= 8; p += 8, len -= 8) {
		uint64_t w = load_le64(p) ^ crc;

		crc = sw_table[7][w & 0xff] ^ sw_table[6][(w >> 8) & 0xff] ^
		      sw_table[5][(w >> 16) & 0xff] ^
		      sw_table[4][(w >> 24) & 0xff] ^
		      sw_table[3][(w >> 32) & 0xff] ^
		      sw_table[2][(w >> 40) & 0xff] ^
		      sw_table[1][(w >> 48) & 0xff] ^ sw_table[0][w >> 56];
	}
	while (len--)
		crc = sw_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#ifdef CRC32C_X86

/* crc32 has a latency of three cycles and a throughput of one, so three
 * independent streams over adjacent blocks keep the unit busy; the block
 * registers are then joined with crc(A|B) = crc(A)*x^(8|B|) ^ crc(B), the
 * multiplication done by the zero-shift tables below.  Long blocks make the
 * join rare; short ones let 4 KiB buffers use the streams as well. */
#define LONG_BLOCK 8192
#define SHORT_BLOCK 256

/* shift_X[k][b]: (b << 8k) times x^(8*X_BLOCK) mod P. */
static uint32_t shift_long[4][256];
static uint32_t shift_short[4][256];

static inline uint32_t shift(const uint32_t t[4][256], uint32_t crc)
{
	return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^
	       t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
}

static inline uint64_t load64(const unsigned char *p)
{
	uint64_t w;

	memcpy(&w, p, sizeof(w));
	return w;
}

__attribute__((target("sse4.2"), always_inline)) static inline uint64_t
crc_3way(uint64_t c0, const unsigned char **pp, size_t *len, size_t block,
	 const uint32_t t[4][256])
{
	const unsigned char *p = *pp;

	while (*len >= 3 * block) {
		const unsigned char *end = p + block;
		uint64_t c1 = 0, c2 = 0;

		do {
			c0 = _mm_crc32_u64(c0, load64(p));
			c1 = _mm_crc32_u64(c1, load64(p + block));
			c2 = _mm_crc32_u64(c2, load64(p + 2 * block));
			p += 8;
		} while (p < end);
		c0 = shift(t, (uint32_t)c0) ^ c1;
		c0 = shift(t, (uint32_t)c0) ^ c2;
		p += 2 * block;
		*len -= 3 * block;
	}
	*pp = p;
	return c0;
}

__attribute__((target("sse4.2"))) uint32_t
crc32c_update_hw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t c = crc;

	/* Aligned 8-byte loads never straddle a cache line. */
	while (len && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		len--;
	}
	c = crc_3way(c, &p, &len, LONG_BLOCK, (const uint32_t (*)[256])shift_long);
	c = crc_3way(c, &p, &len, SHORT_BLOCK, (const uint32_t (*)[256])shift_short);
	for (; len >= 8; p += 8, len -= 8)
		c = _mm_crc32_u64(c, load64(p));
	while (len--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return (uint32_t)c;
}

/* a*b mod P with bit 31 as the x^0 coefficient, as in the register. */
static uint32_t gf2_mulmod(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	for (uint32_t m = 1u << 31; m; m >>= 1) {
		if (a & m)
			prod ^= b;
		b = b & 1 ? (b >> 1) ^ CRC32C_POLY : b >> 1;
	}
	return prod;
}

static void build_shift_table(uint32_t t[4][256], size_t block)
{
	uint32_t xn = 1u << 31;

	for (size_t i = 0; i < 8 * block; i++)
		xn = xn & 1 ? (xn >> 1) ^ CRC32C_POLY : xn >> 1;
	for (unsigned k = 0; k < 4; k++)
		for (uint32_t b = 0; b < 256; b++)
			t[k][b] = gf2_mulmod(xn, b << (8 * k));
}

#else

uint32_t crc32c_update_hw(uint32_t crc, const void *buf, size_t len)
{
	return crc32c_update_sw(crc, buf, len);
}

#endif

/* A constructor rather than a lazy first-call check, so that concurrent
 * first callers never see half-built tables. */
__attribute__((constructor)) static void crc32c_setup(void)
{
	for (uint32_t b = 0; b < 256; b++) {
		uint32_t c = b;

		for (int i = 0; i < 8; i++)
			c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		sw_table[0][b] = c;
	}
	for (unsigned k = 1; k < 8; k++)
		for (unsigned b = 0; b < 256; b++)
			sw_table[k][b] = (sw_table[k - 1][b] >> 8) ^
					 sw_table[0][sw_table[k - 1][b] & 0xff];
#ifdef CRC32C_X86
	/* Constructors may run before libgcc has probed the CPU. */
	__builtin_cpu_init();
	hw_ok = __builtin_cpu_supports("sse4.2");
	if (hw_ok) {
		build_shift_table(shift_long, LONG_BLOCK);
		build_shift_table(shift_short, SHORT_BLOCK);
		update_fn = crc32c_update_hw;
	}
#endif
}

bool crc32c_have_hw(void) { return hw_ok; }

uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len)
{
	return update_fn(crc, buf, len);
}

uint32_t crc32c(const void *buf, size_t len)
{
	return crc32c_final(crc32c_update(crc32c_init(), buf, len));
}
