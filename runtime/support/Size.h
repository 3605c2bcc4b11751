// Size.h - Byte sizes as people write them ("24GiB", "512 MiB", "1000").

#ifndef STRATA_RUNTIME_SUPPORT_SIZE_H
#define STRATA_RUNTIME_SUPPORT_SIZE_H

#include <cstdint>
#include <string>

namespace strata {

/// Parses a byte count with an optional KiB/MiB/GiB/TiB (or K/M/G/T, or
/// KB/MB/GB/TB as powers of 1000) suffix. False on malformed input.
bool parseSize(const std::string &text, uint64_t &bytes);

/// Formats bytes for people: "1.50 GiB", "512 B".
std::string formatSize(uint64_t bytes);

} // namespace strata

#endif // STRATA_RUNTIME_SUPPORT_SIZE_H
