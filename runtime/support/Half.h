// Half.h - IEEE binary16 and bfloat16 storage types with float conversion.

#ifndef STRATA_RUNTIME_SUPPORT_HALF_H
#define STRATA_RUNTIME_SUPPORT_HALF_H

#include "runtime/support/DType.h"

#include <cstdint>
#include <cstring>

namespace strata {

inline float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint32_t floatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

/// IEEE 754 binary16, stored as its bit pattern.
struct Half {
  uint16_t bits = 0;

  static float toFloat(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) // Inf or NaN.
      return bitsToFloat(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      if (mant == 0)
        return bitsToFloat(sign);
      // Subnormal: value = mant * 2^-24.
      float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
      return sign ? -v : v;
    }
    return bitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
  }

  static uint16_t fromFloat(float f) {
    uint32_t x = floatToBits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) // Inf or NaN (keep NaN quiet).
      return static_cast<uint16_t>(sign | 0x7c00 |
                                   (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) // Rounds to beyond the largest half: Inf.
      return static_cast<uint16_t>(sign | 0x7c00);
    if (absx < 0x38800000u) { // Below the smallest normal half.
      // Scale to units of 2^-24 and round to nearest even.
      float a = bitsToFloat(absx) * 16777216.0f;
      uint32_t m = static_cast<uint32_t>(a);
      float rest = a - static_cast<float>(m);
      if (rest > 0.5f || (rest == 0.5f && (m & 1)))
        ++m;
      return static_cast<uint16_t>(sign | m);
    }
    uint32_t exp = ((absx >> 23) - 112) << 10;
    uint32_t mant = (absx >> 13) & 0x3ff;
    uint32_t h = exp | mant;
    uint32_t rest = absx & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
      ++h;
    return static_cast<uint16_t>(sign | h);
  }
};

/// bfloat16: the upper half of a binary32.
struct BFloat16 {
  uint16_t bits = 0;

  static float toFloat(uint16_t b) {
    return bitsToFloat(static_cast<uint32_t>(b) << 16);
  }

  static uint16_t fromFloat(float f) {
    uint32_t x = floatToBits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) // NaN stays NaN.
      return static_cast<uint16_t>((x >> 16) | 0x40);
    uint32_t rounding = 0x7fff + ((x >> 16) & 1);
    return static_cast<uint16_t>((x + rounding) >> 16);
  }
};

/// `n` floats rounded to nearest even into bf16 (`brain`) or fp16 bits:
/// the low-precision weight copies of mixed precision, written by the
/// updates and by strata-export.
inline void narrowFloats(const float *in, uint16_t *out, int64_t n,
                         bool brain) {
  if (brain)
    for (int64_t i = 0; i < n; ++i)
      out[i] = BFloat16::fromFloat(in[i]);
  else
    for (int64_t i = 0; i < n; ++i)
      out[i] = Half::fromFloat(in[i]);
}

/// One element of a floating-point `dtype` at `p`, as a double; 0 for
/// other types.
inline double loadAsDouble(DType dtype, const char *p) {
  switch (dtype) {
  case DType::F64: {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  case DType::F32: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  case DType::F16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return Half::toFloat(h);
  }
  case DType::BF16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return BFloat16::toFloat(h);
  }
  default:
    return 0;
  }
}

/// Stores `v` as one element of a floating-point `dtype` at `p` (rounded
/// to nearest even); other types are left alone.
inline void storeFromDouble(DType dtype, double v, char *p) {
  switch (dtype) {
  case DType::F64:
    std::memcpy(p, &v, 8);
    break;
  case DType::F32: {
    float f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
    break;
  }
  case DType::F16: {
    uint16_t h = Half::fromFloat(static_cast<float>(v));
    std::memcpy(p, &h, 2);
    break;
  }
  case DType::BF16: {
    uint16_t h = BFloat16::fromFloat(static_cast<float>(v));
    std::memcpy(p, &h, 2);
    break;
  }
  default:
    break;
  }
}

} // namespace strata

#endif // STRATA_RUNTIME_SUPPORT_HALF_H
