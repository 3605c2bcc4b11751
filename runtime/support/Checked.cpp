// Checked.cpp - Overflow-checked sizes and strict number parsing.

#include "runtime/support/Checked.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace strata {

std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

std::optional<uint64_t> checkedMulU(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

std::optional<uint64_t> checkedAddU(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

std::optional<int64_t> checkedNumElements(const std::vector<int64_t> &shape,
                                          int64_t limit) {
  int64_t n = 1;
  // A zero dimension makes the count 0, but does not excuse the others:
  // strides over them are products too and must fit.
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0 || d > limit)
      return std::nullopt;
    if (d == 0) {
      zero = true;
      continue;
    }
    std::optional<int64_t> next = checkedMul(n, d);
    if (!next || *next > limit)
      return std::nullopt;
    n = *next;
  }
  return zero ? 0 : n;
}

std::optional<uint64_t> checkedByteSize(const std::vector<int64_t> &shape,
                                        uint64_t elementBytes) {
  std::optional<int64_t> n = checkedNumElements(shape);
  if (!n)
    return std::nullopt;
  std::optional<uint64_t> bytes =
      checkedMulU(static_cast<uint64_t>(*n), elementBytes);
  if (!bytes || *bytes > static_cast<uint64_t>(INT64_MAX))
    return std::nullopt;
  return bytes;
}

bool parseInt64(const std::string &text, int64_t &out, int64_t min,
                int64_t max) {
  if (text.empty() || text.size() > 32)
    return false;
  size_t i = 0;
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    i = 1;
  }
  if (i == text.size())
    return false;
  // Accumulate as a negative number so INT64_MIN parses too.
  int64_t value = 0;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c < '0' || c > '9')
      return false;
    if (__builtin_mul_overflow(value, int64_t(10), &value) ||
        __builtin_sub_overflow(value, int64_t(c - '0'), &value))
      return false;
  }
  if (!negative) {
    if (value == INT64_MIN)
      return false;
    value = -value;
  }
  if (value < min || value > max)
    return false;
  out = value;
  return true;
}

bool parseFiniteDouble(const std::string &text, double &out) {
  if (text.empty() || text.size() > 64 || text[0] == ' ' || text[0] == '\t')
    return false;
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v))
    return false;
  out = v;
  return true;
}

} // namespace strata
