// RowLoopsBody.h - The row loops of RowLoops.h, included inside an
// anonymous namespace by each per-ISA file (no include guard: once per
// file). Everything here is local to that file, and what it uses from
// SharedMath.h with these vector types (math::fast::expfCore, tanhCore,
// loadVec, storeVec) is always inlined, so no copy built for one ISA can
// serve another.

using F8 = float __attribute__((vector_size(32)));
using I8 = int32_t __attribute__((vector_size(32)));
using D4 = double __attribute__((vector_size(32)));

inline F8 load8(const float *p) { return strata::math::loadVec<F8>(p); }
inline void store8(float *p, F8 v) { strata::math::storeVec(p, v); }

/// The integer vector (or integer) matching F.
template <typename F> struct IntOf { using type = int32_t; };
template <> struct IntOf<F8> { using type = I8; };

/// math::tanh_'s operations on eight lanes or one (NaN kept). A function
/// object of this file, so that the GELU templates instantiated with it are
/// this file's too.
struct Tanh {
  template <typename F> F operator()(F x) const {
    F t = strata::math::fast::tanhCore<F, typename IntOf<F>::type>(x);
    return x != x ? x : t;
  }
};

/// d[j] = f(a[j], b[j]) (b may be null, then f ignores it), eight at a time
/// and then one at a time: `f` takes F8s or floats.
template <typename Fn>
void each(const float *a, const float *b, float *d, int64_t n, Fn f) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    store8(d + j, f(load8(a + j), b ? load8(b + j) : F8{}));
  for (; j < n; ++j)
    d[j] = f(a[j], b ? b[j] : 0.0f);
}

void transcendentalLoop(strata::artifact::Kernel k, const float *a,
                        const float *b, float *d, int64_t n) {
  using strata::artifact::Kernel;
  namespace math = strata::math;
  auto exp = [](auto x) {
    using F = decltype(x);
    return math::fast::expfCore<F, typename IntOf<F>::type>(x);
  };
  switch (k) {
  case Kernel::Tanh:
    return each(a, b, d, n, [](auto x, auto) { return Tanh{}(x); });
  case Kernel::Gelu:
    return each(a, b, d, n, [](auto x, auto) {
      return math::geluTanh<decltype(x), float>(x, Tanh{});
    });
  case Kernel::GeluGrad:
    return each(a, b, d, n, [](auto x, auto g) {
      return math::geluTanhDerivative<decltype(x), float>(x, Tanh{}) * g;
    });
  case Kernel::Exp:
    return each(a, b, d, n, [&](auto x, auto) { return exp(x); });
  case Kernel::Sigmoid:
    // 1 / (1 + exp(-x)): 0 and 1 at the ends, as exp saturates.
    return each(a, b, d, n,
                [&](auto x, auto) { return 1.0f / (1.0f + exp(-x)); });
  default:
    return;
  }
}

double expShiftedSumLoop(const float *x, int64_t n, float shift, float *out) {
  namespace fast = strata::math::fast;
  D4 lo = {}, hi = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    F8 e = fast::expfCore<F8, I8>(load8(x + j) - shift);
    store8(out + j, e);
    lo += D4{e[0], e[1], e[2], e[3]};
    hi += D4{e[4], e[5], e[6], e[7]};
  }
  double lane[8] = {lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]};
  for (int l = 0; j < n; ++j, ++l) {
    out[j] = fast::expfCore<float, int32_t>(x[j] - shift);
    lane[l] += out[j];
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
         ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}
