// PointwiseKernels.cpp - CPU kernels: elementwise.

#include "runtime/artifact/KernelContract.h"
#include "runtime/artifact/KernelTable.h"
#include "runtime/backends/cpu/Attention.h"
#include "runtime/backends/cpu/ElementTypes.h"
#include "runtime/backends/cpu/Elementwise.h"
#include "runtime/backends/cpu/KernelFamilies.h"
#include "runtime/backends/cpu/RowMath.h"
#include "runtime/backends/cpu/StreamingUpdates.h"
#include "runtime/kernels/SharedMath.h"
#include "runtime/support/Half.h"
#include "runtime/support/ThreadPool.h"
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>

namespace strata::cpu::kernels {

using math::applyBinary;
using math::applyCompare;
using math::applyUnary;
using math::wrap;

/// ro[i] = ra[i * sa] op rb[i * sb] for a float + - * or / (false for
/// other kernels): the operation chosen outside the loop, and a stride-0
/// (broadcast) operand read once, so that the loop vectorises.
template <typename T>
bool floatArithmetic(Kernel k, const T *ra, int64_t sa, const T *rb, int64_t sb,
                     T *ro, int64_t n) {
  using C = typename Traits<T>::C;
  auto loop = [&](auto op) {
    auto at = [](const T *p, int64_t i) { return Traits<T>::load(p[i]); };
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i)
        ro[i] = Traits<T>::store(op(at(ra, i), at(rb, i)));
    } else if (sa == 0 && sb == 1) {
      C x = at(ra, 0);
      for (int64_t i = 0; i < n; ++i)
        ro[i] = Traits<T>::store(op(x, at(rb, i)));
    } else if (sa == 1 && sb == 0) {
      C y = at(rb, 0);
      for (int64_t i = 0; i < n; ++i)
        ro[i] = Traits<T>::store(op(at(ra, i), y));
    } else {
      for (int64_t i = 0; i < n; ++i)
        ro[i] = Traits<T>::store(op(at(ra, i * sa), at(rb, i * sb)));
    }
    return true;
  };
  switch (k) {
  case Kernel::Add:
    return loop([](C x, C y) { return x + y; });
  case Kernel::Sub:
    return loop([](C x, C y) { return x - y; });
  case Kernel::Mul:
    return loop([](C x, C y) { return x * y; });
  case Kernel::Div:
    return loop([](C x, C y) { return x / y; });
  default:
    return false;
  }
}

bool binary(Kernel k, const TensorRef &a, const TensorRef &b,
            const TensorRef &out, std::string &error) {
  bool compare =
      k == Kernel::Equal || k == Kernel::Less || k == Kernel::Greater;
  std::array<Shape, 2> strides = {broadcastStrides(a.shape, out.shape),
                                  broadcastStrides(b.shape, out.shape)};
  bool divByZero = false;
  dispatch(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    const T *pa = static_cast<const T *>(a.data);
    const T *pb = static_cast<const T *>(b.data);
    forEachRow(out.shape, strides,
               [&](int64_t o, int64_t n, const std::array<int64_t, 2> &base,
                   const std::array<int64_t, 2> &s) {
                 const T *ra = pa + base[0], *rb = pb + base[1];
                 if (compare) {
                   bool *ro = static_cast<bool *>(out.data) + o;
                   for (int64_t i = 0; i < n; ++i)
                     ro[i] = applyCompare<C>(k, Traits<T>::load(ra[i * s[0]]),
                                             Traits<T>::load(rb[i * s[1]]));
                   return;
                 }
                 T *ro = static_cast<T *>(out.data) + o;
                 bool localDivByZero = false;
                 if constexpr (std::is_floating_point_v<C>) {
                   if (floatArithmetic(k, ra, s[0], rb, s[1], ro, n))
                     return;
                 }
                 if (k == Kernel::Add && s[0] == 1 && s[1] == 1) {
                   for (int64_t i = 0; i < n; ++i)
                     ro[i] = Traits<T>::store(wrap<C>(
                         Traits<T>::load(ra[i]), Traits<T>::load(rb[i]), '+'));
                 } else if (k == Kernel::Mul && s[0] == 1 && s[1] == 1) {
                   for (int64_t i = 0; i < n; ++i)
                     ro[i] = Traits<T>::store(wrap<C>(
                         Traits<T>::load(ra[i]), Traits<T>::load(rb[i]), '*'));
                 } else {
                   for (int64_t i = 0; i < n; ++i)
                     ro[i] = Traits<T>::store(applyBinary<C>(
                         k, Traits<T>::load(ra[i * s[0]]),
                         Traits<T>::load(rb[i * s[1]]), localDivByZero));
                 }
                 if (localDivByZero)
                   divByZero = true;
               });
  });
  if (divByZero) {
    error = "integer division by zero";
    return false;
  }
  return true;
}

bool select(const TensorRef &c, const TensorRef &a, const TensorRef &b,
            const TensorRef &out) {
  std::array<Shape, 3> strides = {broadcastStrides(c.shape, out.shape),
                                  broadcastStrides(a.shape, out.shape),
                                  broadcastStrides(b.shape, out.shape)};
  size_t size = dtypeSize(out.dtype);
  const bool *pc = static_cast<const bool *>(c.data);
  const char *pa = static_cast<const char *>(a.data);
  const char *pb = static_cast<const char *>(b.data);
  char *po = static_cast<char *>(out.data);
  // A copy of the element size known at compile time: a load and a store,
  // several times faster than a memcpy call per element.
  auto rows = [&](auto tag) {
    constexpr size_t kSize = sizeof(tag);
    forEachRow(out.shape, strides,
               [&](int64_t o, int64_t n, const std::array<int64_t, 3> &base,
                   const std::array<int64_t, 3> &s) {
                 for (int64_t i = 0; i < n; ++i) {
                   bool pick = pc[base[0] + i * s[0]];
                   const char *src = pick ? pa + (base[1] + i * s[1]) * kSize
                                          : pb + (base[2] + i * s[2]) * kSize;
                   std::memcpy(po + (o + i) * kSize, src, kSize);
                 }
               });
  };
  switch (size) {
  case 1:
    rows(uint8_t());
    break;
  case 2:
    rows(uint16_t());
    break;
  case 4:
    rows(uint32_t());
    break;
  case 8:
    rows(uint64_t());
    break;
  default:
    forEachRow(out.shape, strides,
               [&](int64_t o, int64_t n, const std::array<int64_t, 3> &base,
                   const std::array<int64_t, 3> &s) {
                 for (int64_t i = 0; i < n; ++i) {
                   bool pick = pc[base[0] + i * s[0]];
                   const char *src = pick ? pa + (base[1] + i * s[1]) * size
                                          : pb + (base[2] + i * s[2]) * size;
                   std::memcpy(po + (o + i) * size, src, size);
                 }
               });
  }
  return true;
}

void unary(Kernel k, const TensorRef &in, const TensorRef &out, bool tanhGelu) {
  dispatch(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    const T *pi = static_cast<const T *>(in.data);
    T *po = static_cast<T *>(out.data);
    if constexpr (std::is_same_v<T, float>) {
      // Eight at a time without the C library (RowLoops.h).
      if (detail::hasVectorForm(k, tanhGelu)) {
        parallelFor(in.numElements(), kParallelGrain,
                    [&](int64_t b, int64_t e) {
                      detail::rowLoops().transcendental(k, pi + b, nullptr,
                                                        po + b, e - b);
                    });
        return;
      }
    }
    parallelFor(in.numElements(), kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        po[i] = Traits<T>::store(
            applyUnary<C>(k, Traits<T>::load(pi[i]), tanhGelu));
    });
  });
}

/// Converts one value with ONNX Cast's rules: float to integer truncates,
/// anything to bool tests for non-zero.
template <typename To, typename From> To convert(From v) {
  using CFrom = typename Traits<From>::C;
  using CTo = typename Traits<To>::C;
  CFrom x = Traits<From>::load(v);
  if constexpr (std::is_same_v<CTo, bool>) {
    return Traits<To>::store(x != CFrom(0));
  } else if constexpr (std::is_floating_point_v<CFrom> &&
                       std::is_integral_v<CTo>) {
    if (std::isnan(x))
      return Traits<To>::store(CTo(0));
    return Traits<To>::store(static_cast<CTo>(std::trunc(x)));
  } else {
    return Traits<To>::store(static_cast<CTo>(x));
  }
}

void cast(const TensorRef &in, const TensorRef &out) {
  dispatch(in.dtype, [&](auto fromTag) {
    using From = decltype(fromTag);
    dispatch(out.dtype, [&](auto toTag) {
      using To = decltype(toTag);
      const From *pi = static_cast<const From *>(in.data);
      To *po = static_cast<To *>(out.data);
      parallelFor(in.numElements(), kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          po[i] = convert<To, From>(pi[i]);
      });
    });
  });
}

} // namespace strata::cpu::kernels
