// DType.h - Element types shared by the artifact format, kernels and I/O.

#ifndef STRATA_RUNTIME_SUPPORT_DTYPE_H
#define STRATA_RUNTIME_SUPPORT_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata {

/// Element types. The numeric values are part of the artifact format: never
/// renumber, only append.
enum class DType : uint8_t {
  F32 = 1,
  F64 = 2,
  F16 = 3,
  BF16 = 4,
  I64 = 5,
  I32 = 6,
  I16 = 7,
  I8 = 8,
  U8 = 9,
  U16 = 10,
  U32 = 11,
  U64 = 12,
  Bool = 13,
};

/// Bytes per element; 0 for an invalid value.
size_t dtypeSize(DType dtype);
/// Short name ("float32", "int64", "bool", ...).
const char *dtypeName(DType dtype);
/// Whether `value` is a valid DType code.
bool isValidDType(uint8_t value);
bool isFloatDType(DType dtype);

} // namespace strata

#endif // STRATA_RUNTIME_SUPPORT_DTYPE_H
