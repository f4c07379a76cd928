/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the NVMe/TCP
 * header and data digest.
 *
 * A digest is crc32c_final() of a register that starts at crc32c_init() and
 * goes through any number of crc32c_update() calls, so a data digest can be
 * carried across the iovecs of a PDU without copying them together. */
#ifndef NVMF_CRC32C_H
#define NVMF_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline uint32_t crc32c_init(void) { return ~(uint32_t)0; }
static inline uint32_t crc32c_final(uint32_t crc) { return ~crc; }

/* Runs the SSE4.2 path when the CPU has it, else the table path; the choice
 * is made once, before main. */
uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len);
uint32_t crc32c(const void *buf, size_t len);

/* Both implementations, so tests can hold them against each other.
 * crc32c_update_hw() may be called only when crc32c_have_hw(); on targets
 * other than x86-64 it is the table path and crc32c_have_hw() is false. */
uint32_t crc32c_update_sw(uint32_t crc, const void *buf, size_t len);
uint32_t crc32c_update_hw(uint32_t crc, const void *buf, size_t len);
bool crc32c_have_hw(void);

#endif
