// RowLoopsBody.h - The row loops of RowLoops.h, included inside an
// anonymous namespace by each per-ISA file (no include guard: once per
// file). Everything here is local to that file, and what it uses from
// SharedMath.h with these vector types (math::fast::expfCore, tanhCore) is
// always inlined, so no copy built for one ISA can serve another.

using F8 = float __attribute__((vector_size(32)));
using I8 = int32_t __attribute__((vector_size(32)));
using D4 = double __attribute__((vector_size(32)));

inline F8 load8(const float *p) {
  F8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float *p, F8 v) { __builtin_memcpy(p, &v, sizeof v); }

/// math::tanh_'s operations on eight lanes or one (NaN kept). Function
/// objects of this file, so that the GELU templates instantiated with them
/// are this file's too.
template <typename F, typename I> struct TanhOf {
  F operator()(F x) const {
    F t = strata::math::fast::tanhCore<F, I>(x);
    return x != x ? x : t;
  }
};
using Tanh8 = TanhOf<F8, I8>;
using Tanh1 = TanhOf<float, int32_t>;

void tanhFamilyLoop(strata::artifact::Kernel k, const float *a,
                    const float *b, float *d, int64_t n) {
  using strata::artifact::Kernel;
  namespace math = strata::math;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    F8 x = load8(a + j);
    F8 y = k == Kernel::Tanh   ? Tanh8{}(x)
           : k == Kernel::Gelu ? math::geluTanh<F8, float>(x, Tanh8{})
                               : math::geluTanhDerivative<F8, float>(
                                     x, Tanh8{}) *
                                     load8(b + j);
    store8(d + j, y);
  }
  for (; j < n; ++j)
    d[j] = k == Kernel::Tanh   ? Tanh1{}(a[j])
           : k == Kernel::Gelu ? math::geluTanh<float, float>(a[j], Tanh1{})
                               : math::geluTanhDerivative<float, float>(
                                     a[j], Tanh1{}) *
                                     b[j];
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
