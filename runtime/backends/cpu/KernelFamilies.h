// KernelFamilies.h - The CPU kernels by family, and what they share.
//
// runKernel (Kernels.cpp) dispatches each plan kernel to one of these. One
// file per family: PointwiseKernels.cpp, MatMulKernels.cpp,
// ReductionKernels.cpp, MovementKernels.cpp, LossGradKernels.cpp and
// UpdateKernels.cpp. Internal to the CPU backend.

#ifndef STRATA_RUNTIME_BACKENDS_CPU_KERNELFAMILIES_H
#define STRATA_RUNTIME_BACKENDS_CPU_KERNELFAMILIES_H

#include "runtime/artifact/KernelTable.h"
#include "runtime/backends/cpu/Kernels.h"
#include "runtime/support/Strides.h"
#include "runtime/support/ThreadPool.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::cpu::kernels {

using artifact::Kernel;
using strata::broadcastStrides;
using strata::contiguousStrides;
using strata::product;
using strata::Shape;

//===----------------------------------------------------------------------===//
// Shapes and row loops
//===----------------------------------------------------------------------===//

/// Rows per parallel task, so that each task handles about `target`
/// elements of rows `rowElements` long (at least one row).
inline int64_t rowsPerTask(int64_t rowElements, int64_t target) {
  return std::max<int64_t>(1, target / std::max<int64_t>(rowElements, 1));
}

/// Walks the output in rows of its innermost dimension. For each row calls
/// `row(outOffset, length, base, innerStride)` where base[k]/innerStride[k]
/// locate input k (given by its strides over the output's dimensions).
template <size_t N, typename RowFn>
void forEachRow(const Shape &out, const std::array<Shape, N> &strides,
                RowFn row) {
  size_t rank = out.size();
  int64_t inner = rank ? out[rank - 1] : 1;
  int64_t total = product(out);
  if (total == 0)
    return;
  int64_t rows = total / inner;
  std::array<int64_t, N> innerStride{};
  for (size_t k = 0; k < N; ++k)
    innerStride[k] = rank ? strides[k][rank - 1] : 0;
  int64_t grain = rowsPerTask(inner, 32768);
  parallelFor(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::array<int64_t, N> base{};
      int64_t rem = r;
      for (size_t d = rank >= 1 ? rank - 1 : 0; d-- > 0;) {
        int64_t idx = rem % out[d];
        rem /= out[d];
        for (size_t k = 0; k < N; ++k)
          base[k] += idx * strides[k][d];
      }
      row(r * inner, inner, base, innerStride);
    }
  });
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

bool binary(Kernel k, const TensorRef &a, const TensorRef &b,
            const TensorRef &out, std::string &error);

bool select(const TensorRef &c, const TensorRef &a, const TensorRef &b,
            const TensorRef &out);

void unary(Kernel k, const TensorRef &in, const TensorRef &out, bool tanhGelu);

void cast(const TensorRef &in, const TensorRef &out);

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

void matmul(const TensorRef &a, const TensorRef &b, const TensorRef &out,
            bool ta, bool tb);
/// matmul with the stored rows of `a` (matrices) from `rows` on taken as
/// zero (artifact::Kernel::MatMul's optional third input).
void matmulRows(const TensorRef &a, const TensorRef &b, const TensorRef &out,
                bool ta, bool tb, int64_t rows);
/// Each group of `a`'s rows (`offsets`, as group_rows makes them) times
/// its own weight (transposed with `tb`); rows outside the groups zero.
void groupedMatmul(const TensorRef &a, const TensorRef &offsets,
                   const std::vector<TensorRef> &weights, const TensorRef &out,
                   bool tb);
/// a[group]^T b[group] over group `segment`'s rows.
void segmentMatmul(const TensorRef &a, const TensorRef &b,
                   const TensorRef &offsets, int64_t segment,
                   const TensorRef &out);
/// The true positions of each of the disjoint `masks` in turn, then the
/// positions where none holds; where each mask's positions start, and
/// how many hold. False with `error` when two masks hold at a position.
bool groupRows(const std::vector<TensorRef> &masks, const TensorRef &order,
               const TensorRef &offsets, const TensorRef &count,
               std::string &error);
/// The positions of `mask`'s true entries, then the others (both
/// ascending), and how many are true.
void compactRows(const TensorRef &mask, const TensorRef &order,
                 const TensorRef &count);

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

void reduce(Kernel k, const TensorRef &in, const TensorRef &out,
            const std::vector<int64_t> &ints);

void softmax(Kernel k, const TensorRef &in, const TensorRef &out, int64_t axis);

/// Values of `t` broadcast to `shape` (right-aligned), as doubles.
std::vector<double> expandTo(const TensorRef &t, const Shape &shape);

void layerNorm(const std::vector<TensorRef> &inputs, const TensorRef &out,
               int64_t axis, bool hasBias, double epsilon, bool rms);

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

void transpose(const TensorRef &in, const TensorRef &out,
               const std::vector<int64_t> &perm);

void slice(const TensorRef &in, const TensorRef &out,
           const std::vector<int64_t> &ints);

void broadcast(const TensorRef &in, const TensorRef &out);

void concat(const std::vector<TensorRef> &inputs, const TensorRef &out,
            int64_t axis);

bool gather(const TensorRef &data, const TensorRef &indices,
            const TensorRef &out, int64_t axis, std::string &error);

void trilu(const TensorRef &in, const TensorRef &out, bool upper, int64_t k);

//===----------------------------------------------------------------------===//
// Losses and gradient kernels
//===----------------------------------------------------------------------===//

bool crossEntropy(const TensorRef &logits, const TensorRef &labels,
                  const TensorRef &out, std::string &error);

bool crossEntropyGrad(const TensorRef &logits, const TensorRef &labels,
                      const TensorRef &grad, const TensorRef &out,
                      std::string &error);

void geluGrad(const TensorRef &x, const TensorRef &g, const TensorRef &out,
              bool tanhForm);

void layerNormGrad(const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, int64_t axis,
                   double epsilon, bool rms);

bool gatherGrad(const TensorRef &g, const TensorRef &indices,
                const TensorRef &out, int64_t axis, std::string &error);

void sliceGrad(const TensorRef &g, const TensorRef &out,
               const std::vector<int64_t> &ints);

//===----------------------------------------------------------------------===//
// Optimizer updates (in place), with PyTorch's arithmetic order
//===----------------------------------------------------------------------===//

void accumulate(const TensorRef &acc, const TensorRef &g);

/// AdaLomo with Adafactor's factored second moment (see TrainOps.td).
void updateAdaLomo(const std::vector<TensorRef> &in,
                   const std::vector<double> &hp, const KernelContext &ctx);

void update(const artifact::Step &step, const std::vector<TensorRef> &in,
            int64_t micro, const KernelContext &ctx);

/// See cpu::redoNeeded.
bool redoNeeded(const artifact::Step &step, const std::vector<TensorRef> &in);

} // namespace strata::cpu::kernels

#endif // STRATA_RUNTIME_BACKENDS_CPU_KERNELFAMILIES_H
