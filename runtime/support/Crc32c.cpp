// Crc32c.cpp - CRC-32C with a hardware path.

#include "runtime/support/Crc32c.h"

#include <array>
#include <cstring>

namespace strata {

namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u; // Reflected Castagnoli.

std::array<uint32_t, 256> makeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}

uint32_t crcTable(const unsigned char *p, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> table = makeTable();
  for (size_t i = 0; i < n; ++i)
    crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crcHardware(const unsigned char *p,
                                                       size_t n, uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--)
    c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
#endif

} // namespace

uint32_t crc32c(const void *data, size_t size, uint32_t crc) {
  const auto *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
#if defined(__x86_64__)
  static const bool hasSse42 = __builtin_cpu_supports("sse4.2");
  if (hasSse42)
    return ~crcHardware(p, size, crc);
#endif
  return ~crcTable(p, size, crc);
}

} // namespace strata
