// ElementTypes.h - The CPU kernels' element types: what each storage type
// computes in, and dispatch from a DType to a C++ type.

#ifndef STRATA_RUNTIME_BACKENDS_CPU_ELEMENTTYPES_H
#define STRATA_RUNTIME_BACKENDS_CPU_ELEMENTTYPES_H

#include "runtime/support/DType.h"
#include "runtime/support/Half.h"

#include <cstdint>
#include <type_traits>

namespace strata::cpu {

/// Storage type T computes in Traits<T>::C.
template <typename T> struct Traits {
  using C = T;
  static C load(T v) { return v; }
  static T store(C v) { return v; }
};
template <> struct Traits<Half> {
  using C = float;
  static float load(Half v) { return Half::toFloat(v.bits); }
  static Half store(float v) { return Half{Half::fromFloat(v)}; }
};
template <> struct Traits<BFloat16> {
  using C = float;
  static float load(BFloat16 v) { return BFloat16::toFloat(v.bits); }
  static BFloat16 store(float v) { return BFloat16{BFloat16::fromFloat(v)}; }
};

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<typename Traits<T>::C>;

/// Calls `f(T{})` with the C++ storage type of `dtype`.
template <typename F> auto dispatch(DType dtype, F &&f) {
  switch (dtype) {
  case DType::F32:
    return f(float{});
  case DType::F64:
    return f(double{});
  case DType::F16:
    return f(Half{});
  case DType::BF16:
    return f(BFloat16{});
  case DType::I64:
    return f(int64_t{});
  case DType::I32:
    return f(int32_t{});
  case DType::I16:
    return f(int16_t{});
  case DType::I8:
    return f(int8_t{});
  case DType::U8:
    return f(uint8_t{});
  case DType::U16:
    return f(uint16_t{});
  case DType::U32:
    return f(uint32_t{});
  case DType::U64:
    return f(uint64_t{});
  case DType::Bool:
    return f(bool{});
  }
  return f(float{});
}

/// Like dispatch, for kernels defined on floating-point types only (the
/// verifier keeps integers away from them).
template <typename F> void dispatchFloat(DType dtype, F &&f) {
  dispatch(dtype, [&](auto tag) {
    if constexpr (kIsFloat<decltype(tag)>)
      f(tag);
  });
}

} // namespace strata::cpu

#endif // STRATA_RUNTIME_BACKENDS_CPU_ELEMENTTYPES_H
