// KernelFamilies.cuh - The CUDA kernels by family, and what they share.
//
// launchKernel (Kernels.cu) hands each step to the family that runs it, one
// file each, as the CPU backend's kernels are split (../cpu/KernelFamilies.h):
// PointwiseKernels.cu (elementwise, casts, fused chains), MovementKernels.cu
// (views, concat, gather), ReductionKernels.cu (reductions, softmax, norms),
// LossKernels.cu (cross-entropy), UpdateKernels.cu (optimizer updates),
// AttentionKernels.cu and MatMulKernels.cu (cuBLASLt). Every kernel is
// deterministic: reductions have a fixed order (a block per output with a
// fixed tree, or a thread per output walking its inputs in order), and no
// result depends on atomics. The element arithmetic shared with the CPU lives
// in runtime/kernels/SharedMath.h. Every file is built with -fmad=false so the
// updates round like the CPU's. Internal to the CUDA backend.

#ifndef STRATA_RUNTIME_BACKENDS_CUDA_KERNELFAMILIES_CUH
#define STRATA_RUNTIME_BACKENDS_CUDA_KERNELFAMILIES_CUH

#include "runtime/artifact/KernelContract.h"
#include "runtime/artifact/KernelTable.h"
#include "runtime/backends/cuda/Kernels.h"
#include "runtime/kernels/SharedMath.h"
#include "runtime/support/Strides.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace strata::cuda::kernels {

using artifact::Kernel;
using artifact::Step;
using strata::broadcastStrides;
using strata::contiguousStrides;
using strata::product;
using strata::Shape;
using strata::TensorRef;

constexpr int kMaxRank = 8;
constexpr int kThreads = 256;

/// Attention: head sizes up to this many elements (each lane of a warp
/// holds kPerLane), kWarpsPerBlock rows per block.
constexpr int kMaxHeadDim = 256;
constexpr int kPerLane = kMaxHeadDim / 32;
constexpr int kWarpsPerBlock = 8;

//===----------------------------------------------------------------------===//
// Element types: storage T computes in DT<T>::C
//===----------------------------------------------------------------------===//

struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};

template <typename T> struct DT {
  using C = T;
  __device__ static C load(T v) { return v; }
  __device__ static T store(C v) { return v; }
};
template <> struct DT<F16> {
  using C = float;
  __device__ static float load(F16 v) {
    return __half2float(__ushort_as_half(v.bits));
  }
  __device__ static F16 store(float v) {
    return F16{__half_as_ushort(__float2half_rn(v))};
  }
};
template <> struct DT<BF16> {
  using C = float;
  __device__ static float load(BF16 v) {
    return __bfloat162float(__ushort_as_bfloat16(v.bits));
  }
  __device__ static BF16 store(float v) {
    return BF16{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
  }
};

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<typename DT<T>::C>;

/// Calls f(T{}) for the element types the backend runs; false for others.
template <typename F> bool dispatch(DType dtype, F &&f) {
  switch (dtype) {
  case DType::F32:
    f(float{});
    return true;
  case DType::F64:
    f(double{});
    return true;
  case DType::F16:
    f(F16{});
    return true;
  case DType::BF16:
    f(BF16{});
    return true;
  case DType::I64:
    f(int64_t{});
    return true;
  case DType::I32:
    f(int32_t{});
    return true;
  case DType::I8:
    f(int8_t{});
    return true;
  case DType::U8:
    f(uint8_t{});
    return true;
  case DType::Bool:
    f(bool{});
    return true;
  default:
    return false;
  }
}
template <typename F> bool dispatchFloat(DType dtype, F &&f) {
  switch (dtype) {
  case DType::F32:
    f(float{});
    return true;
  case DType::F64:
    f(double{});
    return true;
  case DType::F16:
    f(F16{});
    return true;
  case DType::BF16:
    f(BF16{});
    return true;
  default:
    return false;
  }
}

//===----------------------------------------------------------------------===//
// Index arithmetic
//===----------------------------------------------------------------------===//

/// Row-major dimensions of an output and, per operand, the element stride
/// of each of them (0 where the operand is broadcast).
template <int N> struct Indexer {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};
  __device__ void offsets(int64_t i, int64_t (&out)[N]) const {
    for (int k = 0; k < N; ++k)
      out[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t q = i % dims[d];
      i /= dims[d];
      for (int k = 0; k < N; ++k)
        out[k] += q * strides[k][d];
    }
  }
};

template <int N>
Indexer<N> makeIndexer(const Shape &out, const std::array<Shape, N> &strides) {
  Indexer<N> ix;
  ix.rank = static_cast<int>(out.size());
  for (int d = 0; d < ix.rank; ++d) {
    ix.dims[d] = out[d];
    for (int k = 0; k < N; ++k)
      ix.strides[k][d] = strides[k][d];
  }
  return ix;
}

inline unsigned blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(b, 1 << 20)));
}

#define STRATA_GRID_LOOP(i, n)                                                 \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(blockDim.x) * gridDim.x)

//===----------------------------------------------------------------------===//
// Block-wide combination, in a fixed order
//===----------------------------------------------------------------------===//

/// Sums (or maxes) `v` over the block in a fixed order; every thread gets
/// the result.
template <typename A> __device__ A blockCombine(A v, bool isMax, A *shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      A o = shared[threadIdx.x + s], m = shared[threadIdx.x];
      shared[threadIdx.x] =
          isMax ? ((o != o || m != m) ? o + m : (o > m ? o : m)) : m + o;
    }
    __syncthreads();
  }
  A r = shared[0];
  __syncthreads();
  return r;
}

template <typename A> __device__ A combine(A acc, A v, bool isMax) {
  return isMax ? ((v != v || acc != acc) ? v + acc : (v > acc ? v : acc))
               : acc + v;
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

inline bool check(cudaError_t e, const char *what, std::string &error) {
  if (e == cudaSuccess)
    return true;
  error = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

/// Launch errors (bad configuration) surface here; execution errors at the
/// next synchronization.
inline bool launched(const char *what, std::string &error) {
  return check(cudaGetLastError(), what, error);
}

inline cudaStream_t streamOf(LaunchContext &l) {
  return static_cast<cudaStream_t>(l.stream);
}

/// Copies of `bytes`-sized elements by the widest word that divides them.
template <typename F> void byWord(size_t bytes, F &&f) {
  switch (bytes) {
  case 8:
    f(uint64_t{});
    break;
  case 4:
    f(uint32_t{});
    break;
  case 2:
    f(uint16_t{});
    break;
  default:
    f(uint8_t{});
    break;
  }
}

/// The end of a family's launch: an error naming the element type when
/// the family had no kernel for it (`typed` false), else any launch error.
inline bool finishLaunch(bool typed, const char *name,
                         const std::vector<TensorRef> &in, std::string &error) {
  if (!typed) {
    error = std::string("the CUDA backend has no ") + name + " kernel for " +
            dtypeName(in[0].dtype);
    return false;
  }
  return launched(name, error);
}

//===----------------------------------------------------------------------===//
// The families: each launches the steps of its kernels and returns whether
// that worked, or nullopt for a kernel of another family
//===----------------------------------------------------------------------===//

#define STRATA_KERNEL_FAMILY(name)                                             \
  std::optional<bool> name(const Step &step, const std::vector<TensorRef> &in, \
                           const std::vector<TensorRef> &out,                  \
                           const KernelContext &ctx, LaunchContext &l,         \
                           std::string &error)

STRATA_KERNEL_FAMILY(launchPointwise);
STRATA_KERNEL_FAMILY(launchMovement);
STRATA_KERNEL_FAMILY(launchReduction);
STRATA_KERNEL_FAMILY(launchLoss);
STRATA_KERNEL_FAMILY(launchUpdate);
STRATA_KERNEL_FAMILY(launchAttention);
STRATA_KERNEL_FAMILY(launchMatMul);

} // namespace strata::cuda::kernels

#endif // STRATA_RUNTIME_BACKENDS_CUDA_KERNELFAMILIES_CUH
