// SharedMath.h - Element arithmetic both backends run: the same source on
// the CPU (runtime/backends/cpu/Kernels.cpp) and the GPU
// (runtime/backends/cuda/Kernels.cu), so the CPU tests cover what the GPU
// computes.
//
// The optimizer updates are written so both give the same bits: every
// operation is a single IEEE-rounded float operation (sqrt and division
// included; nvcc's defaults), in the same order, and neither compiler may
// contract a multiply and an add into an FMA (the CPU build has no FMA
// instruction at its baseline, and runtime/backends/cuda builds with
// -fmad=false). The transcendental functions (exp, tanh, erf, ...) are each
// platform's own and may differ in the last bits.

#ifndef STRATA_RUNTIME_KERNELS_SHAREDMATH_H
#define STRATA_RUNTIME_KERNELS_SHAREDMATH_H

#include "runtime/artifact/Plan.h"
#include "runtime/kernels/UpdateCoefficients.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__
#else
#define STRATA_HD
#endif

namespace strata::math {

using artifact::Kernel;

// One spelling for each function on both sides.
#if defined(__CUDA_ARCH__)
#define STRATA_MATH1(name, f, d)                                               \
  STRATA_HD inline float name(float x) { return f(x); }                        \
  STRATA_HD inline double name(double x) { return d(x); }
#else
#define STRATA_MATH1(name, f, d)                                               \
  STRATA_HD inline float name(float x) { return std::d(x); }                   \
  STRATA_HD inline double name(double x) { return std::d(x); }
#endif
STRATA_MATH1(exp_, expf, exp)
STRATA_MATH1(log_, logf, log)
STRATA_MATH1(sqrt_, sqrtf, sqrt)
STRATA_MATH1(sin_, sinf, sin)
STRATA_MATH1(cos_, cosf, cos)
STRATA_MATH1(erf_, erff, erf)
STRATA_MATH1(fabs_, fabsf, fabs)
#undef STRATA_MATH1

#if defined(__CUDA_ARCH__)
STRATA_HD inline float tanh_(float x) { return tanhf(x); }
STRATA_HD inline double tanh_(double x) { return tanh(x); }
#else
namespace fast {
/// exp of a float for the host: no call and no branch, so that the CPU
/// kernels can run it on vectors (`F` a float or a GCC vector of floats,
/// `I` the matching 32-bit integer type; the same operations lane by lane,
/// so the bits are the same either way). y = n ln2 + r with |r| <= ln2/2 (n
/// by the round-to-integer trick of adding 1.5 * 2^23, which also leaves n
/// in the low bits), exp(r) by its Taylor polynomial to degree 7 (relative
/// error below 1e-8), times 2^n as two normal powers of two (2^128 is not
/// one): within two ulps of the correctly rounded exp. Below -87.33 (where
/// exp leaves float's normal range) the result is 0; above 88.7228 (the log
/// of float's largest) +inf; NaN stays NaN. The C library's expf is a call
/// per element: most of a softmax's time.
///
/// Always inlined (and so never emitted on its own), as is tanhCore: the
/// per-ISA row loops (RowLoopsBody.h) instantiate both with the same vector
/// types under different -m flags, and one out-of-line copy would serve
/// both.
template <typename F, typename I>
__attribute__((always_inline)) inline F expfCore(F y) {
  F c = y < -87.33f ? F{} - 87.33f : y;
  c = c < 88.7228f ? c : F{} + 88.7228f;
  F shifted = c * 1.44269504f + 0x1.8p23f;
  F n = shifted - 0x1.8p23f;
  F r = (c - n * 0.693359375f) - n * -2.12194440e-4f;
  F p = F{} + 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1;
  p = p * r + 1;
  // n in [-126, 128]: 2^n = 2^h 2^(n - h), h = floor(n / 2), both normal;
  // each product by a power of two is exact short of overflow.
  I ni = __builtin_bit_cast(I, shifted) - 0x4B400000;
  I h = ni >> 1;
  F e = p * __builtin_bit_cast(F, (h + 127) << 23);
  e = e * __builtin_bit_cast(F, (ni - h + 127) << 23);
  e = y < -87.33f ? F{} : e;
  e = y > 88.7228f ? F{} + __builtin_inff() : e;
  return y != y ? y : e;
}

/// tanh of a float for the host, the same way. Below |x| = 0.3, its odd
/// Taylor polynomial to x^13 (the next term is under 1e-10 of it). Above,
/// 1 - 2 / (e + 1) with e = expfCore(2|x|), |x| clamped to 10 (tanh(10) is
/// 1 in float). Within four ulps of the correctly rounded tanh (most
/// results are it); the sign is x's, -0 included. The C library's tanhf is
/// most of a GELU's time.
template <typename F, typename I>
__attribute__((always_inline)) inline F tanhCore(F x) {
  F a = x < 0 ? -x : x;
  F z = a * a;
  F odd = F{} + 21844.0f / 6081075.0f;
  odd = odd * z + -1382.0f / 155925.0f;
  odd = odd * z + 62.0f / 2835.0f;
  odd = odd * z + -17.0f / 315.0f;
  odd = odd * z + 2.0f / 15.0f;
  odd = odd * z + -1.0f / 3.0f;
  F small = a + a * z * odd;
  F e = expfCore<F, I>((a < 10 ? a : F{} + 10) * 2);
  F large = 1 - 2 / (e + 1);
  F t = a < 0.3f ? small : large;
  return __builtin_bit_cast(F,
                            __builtin_bit_cast(I, t) |
                                (__builtin_bit_cast(I, x) & (I{} + INT32_MIN)));
}

/// exp of a double for the host, the same way (`D` a double or a GCC vector
/// of doubles, `I` the matching 64-bit integer type): the argument clamped
/// to [-708, 709] (below -708 the result is 0; 2^n stays a normal number),
/// y = n ln2 + r with |r| <= ln2/2 (n by adding 1.5 * 2^52), exp(r) by its
/// Taylor polynomial to degree 11 (relative error below 1e-14), 2^n from
/// its exponent bits. NaN stays NaN; above 709 the result is exp(709).
template <typename D, typename I> inline D expCore(D y) {
  D c = y < -708 ? D{} - 708 : y;
  c = c < 709 ? c : D{} + 709;
  D shifted = c * 1.4426950408889634 + 0x1.8p52;
  D n = shifted - 0x1.8p52;
  D r = (c - n * 0.693145751953125) - n * 1.4286068203094173e-06;
  D p = D{} + 1.0 / 39916800;
  p = p * r + 1.0 / 3628800;
  p = p * r + 1.0 / 362880;
  p = p * r + 1.0 / 40320;
  p = p * r + 1.0 / 5040;
  p = p * r + 1.0 / 720;
  p = p * r + 1.0 / 120;
  p = p * r + 1.0 / 24;
  p = p * r + 1.0 / 6;
  p = p * r + 0.5;
  p = p * r + 1;
  p = p * r + 1;
  I bits = (__builtin_bit_cast(I, shifted) -
            (I{} + (int64_t(0x4338000000000000) - 1023)))
           << 52;
  D e = p * __builtin_bit_cast(D, bits);
  D out = y < -708 ? D{} : e;
  return y != y ? y : out;
}
} // namespace fast

/// tanh of a float on the host (fast::tanhCore); NaN stays NaN.
STRATA_HD inline float tanh_(float x) {
  float t = fast::tanhCore<float, int32_t>(x);
  return x != x ? x : t;
}

/// Four floats at once (a GCC vector), for the CPU kernels' loops.
using Float4 = float __attribute__((vector_size(16)));
/// A GCC vector of floats `V` from or to unaligned memory; always inlined,
/// as expfCore is (the per-ISA row loops use them with 8-float vectors).
template <typename V>
__attribute__((always_inline)) inline V loadVec(const float *p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <typename V>
__attribute__((always_inline)) inline void storeVec(float *p, V v) {
  __builtin_memcpy(p, &v, sizeof v);
}
STRATA_HD inline double tanh_(double x) { return std::tanh(x); }
#endif

STRATA_HD inline double pow_(double a, double b) {
#if defined(__CUDA_ARCH__)
  return ::pow(a, b);
#else
  return std::pow(a, b);
#endif
}

/// Integer +, - and * wrap (two's complement), as on every GPU; in C++
/// signed overflow is undefined, so compute in the unsigned type.
template <typename C> STRATA_HD C wrap(C a, C b, char op) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C> &&
                !std::is_same_v<C, bool>) {
    using U = std::make_unsigned_t<C>;
    U x = static_cast<U>(a), y = static_cast<U>(b);
    return static_cast<C>(op == '+'   ? static_cast<U>(x + y)
                          : op == '-' ? static_cast<U>(x - y)
                                      : static_cast<U>(x * y));
  } else {
    return op == '+' ? a + b : op == '-' ? a - b : a * b;
  }
}

/// A binary elementwise kernel's value; sets `divByZero` for an integer
/// division by zero (the result is then 0).
template <typename C>
STRATA_HD C applyBinary(Kernel k, C a, C b, bool &divByZero) {
  switch (k) {
  case Kernel::Add:
    return wrap(a, b, '+');
  case Kernel::Sub:
    return wrap(a, b, '-');
  case Kernel::Mul:
    return wrap(a, b, '*');
  case Kernel::Div:
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) {
        divByZero = true;
        return 0;
      }
      if constexpr (std::is_signed_v<C>)
        if (b == -1)
          return static_cast<C>(0 - a); // Avoids INT_MIN / -1 trapping.
    }
    return a / b;
  case Kernel::Pow:
    return static_cast<C>(pow_(static_cast<double>(a), static_cast<double>(b)));
  case Kernel::Max:
    if constexpr (std::is_floating_point_v<C>)
      if (a != a || b != b)
        return a + b; // NaN.
    return a > b ? a : b;
  case Kernel::Min:
    if constexpr (std::is_floating_point_v<C>)
      if (a != a || b != b)
        return a + b;
    return a < b ? a : b;
  case Kernel::And:
    return a && b;
  case Kernel::Or:
    return a || b;
  default:
    return a;
  }
}

template <typename C> STRATA_HD bool applyCompare(Kernel k, C a, C b) {
  switch (k) {
  case Kernel::Equal:
    return a == b;
  case Kernel::Less:
    return a < b;
  case Kernel::Greater:
    return a > b;
  default:
    return false;
  }
}

/// tanh_ as a function object (geluTanh's default).
struct TanhOf {
  template <typename C> STRATA_HD C operator()(C x) const { return tanh_(x); }
};

/// The tanh GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and
/// its derivative, of a C holding S values: a float or a double, or on the
/// host several floats at once (a GCC vector, S float, with a `tanh` that
/// takes it), the same operations in the same order either way.
template <typename C, typename S = C, typename Tanh = TanhOf>
STRATA_HD C geluTanh(C x, Tanh tanhOf = {}) {
  const S k0 = S(0.7978845608028654); // sqrt(2/pi)
  return S(0.5) * x * (S(1) + tanhOf(k0 * (x + S(0.044715) * x * x * x)));
}

template <typename C, typename S = C, typename Tanh = TanhOf>
STRATA_HD C geluTanhDerivative(C v, Tanh tanhOf = {}) {
  const S k0 = S(0.7978845608028654), k1 = S(0.044715);
  C t = tanhOf(k0 * (v + k1 * v * v * v));
  return S(0.5) * (S(1) + t) +
         S(0.5) * v * (S(1) - t * t) * k0 * (S(1) + S(3) * k1 * v * v);
}

template <typename C> STRATA_HD C applyUnary(Kernel k, C x, bool tanhGelu) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (k) {
    case Kernel::Neg:
      return -x;
    case Kernel::Abs:
      return fabs_(x);
    case Kernel::Exp:
      return exp_(x);
    case Kernel::Log:
      return log_(x);
    case Kernel::Sqrt:
      return sqrt_(x);
    case Kernel::Reciprocal:
      return C(1) / x;
    case Kernel::Tanh:
      return tanh_(x);
    case Kernel::Sin:
      return sin_(x);
    case Kernel::Cos:
      return cos_(x);
    case Kernel::Erf:
      return erf_(x);
    case Kernel::Sigmoid:
      // Stable for large |x|.
      return x >= 0 ? C(1) / (C(1) + exp_(-x)) : exp_(x) / (C(1) + exp_(x));
    case Kernel::Relu:
      return x > 0 ? x : C(0);
    case Kernel::Gelu:
      if (tanhGelu)
        return geluTanh(x);
      return C(0.5) * x * (C(1) + erf_(x * C(0.7071067811865476)));
    default:
      return x;
    }
  } else {
    if (k == Kernel::Neg)
      return static_cast<C>(0 - x);
    if (k == Kernel::Abs) {
      if constexpr (std::is_signed_v<C>)
        return x < 0 ? static_cast<C>(0 - x) : x;
      return x;
    }
    if (k == Kernel::Not)
      return !x;
    return x;
  }
}

/// d gelu(x) / dx (the tanh approximation or the exact erf form).
template <typename C> STRATA_HD C geluDerivative(C v, bool tanhForm) {
  if (tanhForm)
    return geluTanhDerivative(v);
  C cdf = C(0.5) * (C(1) + erf_(v * C(0.7071067811865476)));
  C pdf = exp_(C(-0.5) * v * v) * C(0.3989422804014327);
  return cdf + v * pdf;
}

template <typename C>
STRATA_HD inline C sgdElement(C w, C g, const UpdateCoefficients<C> &c) {
  C d = g * c.scale;
  if (c.wd != 0)
    d = d + c.wd * w;
  return w - c.lr * d;
}

template <typename C>
STRATA_HD inline void momentumElement(C &w, C g, C &buf,
                                      const UpdateCoefficients<C> &c) {
  C d = g * c.scale;
  if (c.wd != 0)
    d = d + c.wd * w;
  C b = c.first ? d : buf * c.momentum + d;
  buf = b;
  w = w - c.lr * b;
}

template <typename C>
STRATA_HD inline void adamwElement(C &w, C g, C &m, C &v,
                                   const UpdateCoefficients<C> &c) {
  C gi = g * c.scale;
  C wi = w * c.decay;
  C mi = m * c.b1 + gi * (C(1) - c.b1);
  C vi = v * c.b2 + gi * gi * (C(1) - c.b2);
  C denom = sqrt_(vi) / c.bc2Sqrt + c.eps;
  m = mi;
  v = vi;
  w = wi - c.stepSize * (mi / denom);
}

/// The coefficients of update kernel `k` (floats `hp`) for this step;
/// false when the step is skipped (scale zero or NaN: an overflow under loss
/// scaling).
template <typename C>
inline bool updateCoefficients(Kernel k, const double *hp, C scale,
                               int64_t micro, int64_t step, double lrFactor,
                               UpdateCoefficients<C> &c) {
  if (!(scale > C(0)))
    return false;
  // An accumulated gradient is the sum over `micro` micro-batches.
  if (micro > 1)
    scale = scale / static_cast<C>(micro);
  c = UpdateCoefficients<C>();
  c.scale = scale;
  c.lr = static_cast<C>(hp[0] * lrFactor);
  c.first = step == 1;
  if (k == Kernel::UpdateSgd) {
    c.wd = static_cast<C>(hp[1]);
  } else if (k == Kernel::UpdateMomentum) {
    c.momentum = static_cast<C>(hp[1]);
    c.wd = static_cast<C>(hp[2]);
  } else {
    c.b1 = static_cast<C>(hp[1]);
    c.b2 = static_cast<C>(hp[2]);
    c.eps = static_cast<C>(hp[3]);
    double lrd = hp[0] * lrFactor;
    c.decay = static_cast<C>(1.0 - lrd * hp[4]);
    double bc1 = 1.0 - std::pow(hp[1], double(step));
    double bc2 = 1.0 - std::pow(hp[2], double(step));
    c.stepSize = static_cast<C>(lrd / bc1);
    c.bc2Sqrt = static_cast<C>(std::sqrt(bc2));
  }
  return true;
}

} // namespace strata::math

#endif // STRATA_RUNTIME_KERNELS_SHAREDMATH_H
