// MovementKernels.cpp - CPU kernels: data movement.

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

/// out[i] = src[base + sum(index[d] * strides[d])] for every output index;
/// strides are in elements and may be zero or negative.
void stridedCopy(size_t elemSize, const Shape &outShape, const char *src,
                 int64_t base, const Shape &strides, char *dst) {
  std::array<Shape, 1> s = {strides};
  forEachRow(outShape, s,
             [&](int64_t o, int64_t n, const std::array<int64_t, 1> &b,
                 const std::array<int64_t, 1> &st) {
               const char *from = src + (base + b[0]) * int64_t(elemSize);
               char *to = dst + o * int64_t(elemSize);
               if (st[0] == 1) {
                 std::memcpy(to, from, n * elemSize);
                 return;
               }
               int64_t step = st[0] * int64_t(elemSize);
               switch (elemSize) {
               case 4:
                 for (int64_t i = 0; i < n; ++i)
                   std::memcpy(to + i * 4, from + i * step, 4);
                 break;
               case 8:
                 for (int64_t i = 0; i < n; ++i)
                   std::memcpy(to + i * 8, from + i * step, 8);
                 break;
               default:
                 for (int64_t i = 0; i < n; ++i)
                   std::memcpy(to + i * elemSize, from + i * step, elemSize);
               }
             });
}

void transpose(const TensorRef &in, const TensorRef &out,
               const std::vector<int64_t> &perm) {
  Shape inStrides = contiguousStrides(in.shape);
  Shape strides(perm.size());
  for (size_t d = 0; d < perm.size(); ++d)
    strides[d] = inStrides[perm[d]];
  stridedCopy(dtypeSize(in.dtype), out.shape,
              static_cast<const char *>(in.data), 0, strides,
              static_cast<char *>(out.data));
}

void slice(const TensorRef &in, const TensorRef &out,
           const std::vector<int64_t> &ints) {
  size_t rank = in.shape.size();
  Shape inStrides = contiguousStrides(in.shape);
  Shape strides(rank);
  int64_t base = 0;
  for (size_t d = 0; d < rank; ++d) {
    base += ints[d] * inStrides[d];
    strides[d] = ints[rank + d] * inStrides[d];
  }
  stridedCopy(dtypeSize(in.dtype), out.shape,
              static_cast<const char *>(in.data), base, strides,
              static_cast<char *>(out.data));
}

void broadcast(const TensorRef &in, const TensorRef &out) {
  stridedCopy(
      dtypeSize(in.dtype), out.shape, static_cast<const char *>(in.data), 0,
      broadcastStrides(in.shape, out.shape), static_cast<char *>(out.data));
}

void concat(const std::vector<TensorRef> &inputs, const TensorRef &out,
            int64_t axis) {
  size_t size = dtypeSize(out.dtype);
  int64_t outer = product(out.shape, 0, axis);
  int64_t inner = product(out.shape, axis + 1);
  int64_t outRow = out.shape[axis] * inner * size;
  int64_t offset = 0;
  for (const TensorRef &t : inputs) {
    int64_t chunk = t.shape[axis] * inner * size;
    const char *src = static_cast<const char *>(t.data);
    char *dst = static_cast<char *>(out.data) + offset;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * outRow, src + o * chunk, chunk);
    offset += chunk;
  }
}

bool gather(const TensorRef &data, const TensorRef &indices,
            const TensorRef &out, int64_t axis, std::string &error) {
  size_t size = dtypeSize(data.dtype);
  int64_t outer = product(data.shape, 0, axis), dim = data.shape[axis];
  int64_t inner = product(data.shape, axis + 1) * size;
  int64_t n = indices.numElements();
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = indices.dtype == DType::I32
                    ? static_cast<const int32_t *>(indices.data)[i]
                    : static_cast<const int64_t *>(indices.data)[i];
    if (v < -dim || v >= dim) {
      error = "gather index " + std::to_string(v) + " out of range [" +
              std::to_string(-dim) + ", " + std::to_string(dim) + ")";
      return false;
    }
    idx[i] = v < 0 ? v + dim : v;
  }
  const char *src = static_cast<const char *>(data.data);
  char *dst = static_cast<char *>(out.data);
  parallelFor(outer * n, rowsPerTask(inner, 65536), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t o = r / n, i = r % n;
      std::memcpy(dst + r * inner, src + (o * dim + idx[i]) * inner, inner);
    }
  });
  return true;
}

void trilu(const TensorRef &in, const TensorRef &out, bool upper, int64_t k) {
  size_t size = dtypeSize(in.dtype);
  const Shape &s = in.shape;
  if (s.size() < 2) // The verifier guarantees matrices.
    return;
  int64_t rows = s[s.size() - 2], cols = s.back();
  int64_t matrices = product(s, 0, s.size() - 2);
  const char *src = static_cast<const char *>(in.data);
  char *dst = static_cast<char *>(out.data);
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        int64_t off = ((m * rows + i) * cols + j) * size;
        bool keep = upper ? j >= i + k : j <= i + k;
        if (keep)
          std::memcpy(dst + off, src + off, size);
        else
          std::memset(dst + off, 0, size);
      }
}

void compactRows(const TensorRef &mask, const TensorRef &order,
                 const TensorRef &count) {
  const auto *m = static_cast<const uint8_t *>(mask.data);
  auto *o = static_cast<int64_t *>(order.data);
  int64_t n = mask.numElements(), k = 0;
  for (int64_t i = 0; i < n; ++i)
    if (m[i])
      o[k++] = i;
  *static_cast<int64_t *>(count.data) = k;
  for (int64_t i = 0; i < n; ++i)
    if (!m[i])
      o[k++] = i;
}

bool groupRows(const std::vector<TensorRef> &masks, const TensorRef &order,
               const TensorRef &offsets, const TensorRef &count,
               std::string &error) {
  int64_t n = order.numElements(), k = 0;
  auto *o = static_cast<int64_t *>(order.data);
  auto *off = static_cast<int64_t *>(offsets.data);
  std::vector<uint8_t> taken(n, 0);
  for (size_t e = 0; e < masks.size(); ++e) {
    off[e] = k;
    const auto *m = static_cast<const uint8_t *>(masks[e].data);
    for (int64_t i = 0; i < n; ++i) {
      if (!m[i])
        continue;
      if (taken[i]) {
        error = "group_rows: masks " + std::to_string(e) +
                " and an earlier one both hold at position " +
                std::to_string(i) + " (they must be disjoint)";
        return false;
      }
      taken[i] = 1;
      o[k++] = i;
    }
  }
  off[masks.size()] = k;
  *static_cast<int64_t *>(count.data) = k;
  for (int64_t i = 0; i < n; ++i)
    if (!taken[i])
      o[k++] = i;
  return true;
}

} // namespace strata::cpu::kernels
