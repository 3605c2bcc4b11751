// Checked.h - Overflow-checked sizes and strict number parsing.
//
// Every shape product and byte count in Strata goes through these helpers:
// a dimension list from a hostile model or file must give an error, never a
// wrapped count that later sizes a buffer. Number parsing reports malformed
// or out-of-range text instead of throwing (std::stoll) or stopping at the
// first bad character (atoll, "12abc" read as 12).

#ifndef STRATA_RUNTIME_SUPPORT_CHECKED_H
#define STRATA_RUNTIME_SUPPORT_CHECKED_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata {

/// a * b, or nullopt when it overflows int64 or either is negative.
std::optional<int64_t> checkedMul(int64_t a, int64_t b);
/// a + b, or nullopt when it overflows int64 or either is negative.
std::optional<int64_t> checkedAdd(int64_t a, int64_t b);
/// a * b for unsigned byte counts, or nullopt on overflow.
std::optional<uint64_t> checkedMulU(uint64_t a, uint64_t b);
std::optional<uint64_t> checkedAddU(uint64_t a, uint64_t b);

/// The number of elements of `shape`: nullopt when a dimension is negative
/// or the product exceeds `limit` (default: int64's range).
std::optional<int64_t> checkedNumElements(const std::vector<int64_t> &shape,
                                          int64_t limit = INT64_MAX);
/// elements * elementBytes, checked.
std::optional<uint64_t> checkedByteSize(const std::vector<int64_t> &shape,
                                        uint64_t elementBytes);

/// Parses all of `text` as a base-10 integer in [min, max]. No sign for
/// max < 0 is special; leading '+' is accepted; whitespace is not.
bool parseInt64(const std::string &text, int64_t &out, int64_t min = INT64_MIN,
                int64_t max = INT64_MAX);
/// Parses all of `text` as a finite floating-point number.
bool parseFiniteDouble(const std::string &text, double &out);

} // namespace strata

#endif // STRATA_RUNTIME_SUPPORT_CHECKED_H
