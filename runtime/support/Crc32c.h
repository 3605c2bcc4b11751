// Crc32c.h - CRC-32C (Castagnoli) checksums for artifact files.

#ifndef STRATA_RUNTIME_SUPPORT_CRC32C_H
#define STRATA_RUNTIME_SUPPORT_CRC32C_H

#include <cstddef>
#include <cstdint>

namespace strata {

/// Extends `crc` (0 to start) over `size` bytes. Uses the SSE4.2 instruction
/// when the CPU has it, a table otherwise; both give the same result.
uint32_t crc32c(const void *data, size_t size, uint32_t crc = 0);

} // namespace strata

#endif // STRATA_RUNTIME_SUPPORT_CRC32C_H
