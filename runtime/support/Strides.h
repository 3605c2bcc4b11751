// Strides.h - Row-major element counts and strides of a shape.
//
// The one definition the CPU and CUDA kernels (and their launches) share:
// how many elements a range of dimensions holds, the strides of a densely
// packed tensor, and the strides that read a tensor broadcast to a larger
// shape (NumPy's right-aligned rule).

#ifndef STRATA_RUNTIME_SUPPORT_STRIDES_H
#define STRATA_RUNTIME_SUPPORT_STRIDES_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata {

using Shape = std::vector<int64_t>;

/// The product of dimensions [begin, end) of `s` (clamped to its rank).
inline int64_t product(const Shape &s, size_t begin = 0,
                       size_t end = SIZE_MAX) {
  end = std::min(end, s.size());
  int64_t n = 1;
  for (size_t d = std::min(begin, end); d < end; ++d)
    n *= s[d];
  return n;
}

/// Strides (in elements) of a densely packed row-major tensor.
inline Shape contiguousStrides(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// Strides (in elements) to read `in` broadcast to `out`: right-aligned,
/// zero where `in` has size 1.
inline Shape broadcastStrides(const Shape &in, const Shape &out) {
  Shape strides(out.size(), 0);
  Shape own = contiguousStrides(in);
  size_t offset = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    strides[offset + d] = in[d] == 1 ? 0 : own[d];
  return strides;
}

} // namespace strata

#endif // STRATA_RUNTIME_SUPPORT_STRIDES_H
