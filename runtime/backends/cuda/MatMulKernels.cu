// MatMulKernels.cu - CUDA kernels: matrix products through cuBLASLt.

#include "runtime/backends/cuda/KernelFamilies.cuh"

#include <algorithm>

#include <cublasLt.h>

#include <map>
#include <mutex>
#include <tuple>

namespace strata::cuda::kernels {

namespace {

bool lt(cublasStatus_t s, const char *what, std::string &error) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return true;
  error = std::string("cuBLASLt ") + what + " failed (status " +
          std::to_string(static_cast<int>(s)) + ")";
  return false;
}

/// One algorithm per shape, picked once by the heuristic and kept.
struct PlanKey {
  int64_t m, n, k, batch, strideA, strideB;
  bool ta, tb;
  int type;
  bool operator<(const PlanKey &o) const {
    return std::tie(m, n, k, batch, strideA, strideB, ta, tb, type) <
           std::tie(o.m, o.n, o.k, o.batch, o.strideA, o.strideB, o.ta, o.tb,
                    o.type);
  }
};
struct CachedPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
};
std::mutex planMutex;
std::map<PlanKey, CachedPlan> plans;

bool matmul(const Step &step, const TensorRef &a, const TensorRef &b,
            const TensorRef &out, LaunchContext &l, std::string &error) {
  artifact::MatMulShape shape;
  if (!artifact::matmulShape(a.shape, b.shape, step.ints, shape, error))
    return false;
  bool ta = shape.ta, tb = shape.tb;
  int64_t m = shape.m, k = shape.k, n = shape.n;
  int64_t batchA = product(shape.batchA), batchB = product(shape.batchB);
  int64_t batch = product(shape.batch);
  // Strided batches: each operand is either a full batch or one matrix
  // read by all (general batch broadcasting is left to the plan).
  if ((batchA != batch && batchA != 1) || (batchB != batch && batchB != 1) ||
      out.numElements() != batch * m * n) {
    error = "matmul: batch dimensions that broadcast other than all-or-one "
            "are not supported by the CUDA backend";
    return false;
  }
  if (m == 0 || n == 0)
    return true;
  cudaDataType_t type = a.dtype == DType::F32   ? CUDA_R_32F
                        : a.dtype == DType::F16 ? CUDA_R_16F
                                                : CUDA_R_16BF;
  int64_t strideA = batchA == 1 ? 0 : m * k, strideB = batchB == 1 ? 0 : k * n;
  // Row-major C[m,n] = A B is column-major C^T[n,m] = B^T A^T: cuBLASLt
  // multiplies B (as the first operand) by A.
  PlanKey key{m, n, k, batch, strideA, strideB, ta, tb, static_cast<int>(type)};
  CachedPlan plan;
  {
    std::lock_guard<std::mutex> lock(planMutex);
    auto it = plans.find(key);
    if (it != plans.end())
      plan = it->second;
  }
  auto handle = static_cast<cublasLtHandle_t>(l.cublasLt);
  if (!plan.desc) {
    // fp32 accumulate always (no TF32: parity runs compare with the CPU).
    if (!lt(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F,
                                     CUDA_R_32F),
            "descriptor", error))
      return false;
    cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opB,
                                   sizeof(opB));
    cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opA,
                                   sizeof(opA));
    // Column-major views of the row-major operands.
    uint64_t rowsB = tb ? k : n, colsB = tb ? n : k; // B^T as stored
    uint64_t rowsA = ta ? m : k, colsA = ta ? k : m;
    if (!lt(cublasLtMatrixLayoutCreate(&plan.a, type, rowsB, colsB, rowsB),
            "layout", error) ||
        !lt(cublasLtMatrixLayoutCreate(&plan.b, type, rowsA, colsA, rowsA),
            "layout", error) ||
        !lt(cublasLtMatrixLayoutCreate(&plan.c, type, n, m, n), "layout",
            error))
      return false;
    int32_t count = static_cast<int32_t>(batch);
    int64_t strideC = m * n;
    for (auto [layout, stride] :
         {std::pair{plan.a, strideB}, {plan.b, strideA}, {plan.c, strideC}}) {
      cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
      cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
          sizeof(stride));
    }
    cublasLtMatmulPreference_t pref;
    if (!lt(cublasLtMatmulPreferenceCreate(&pref), "preference", error))
      return false;
    uint64_t ws = l.workspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a,
                                                      plan.b, plan.c, plan.c,
                                                      pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (!lt(s, "heuristic", error))
      return false;
    if (found == 0) {
      error = "cuBLASLt has no algorithm for this matmul";
      return false;
    }
    plan.algo = result.algo;
    std::lock_guard<std::mutex> lock(planMutex);
    plans[key] = plan;
  }
  float alpha = 1.0f, beta = 0.0f;
  return lt(cublasLtMatmul(handle, plan.desc, &alpha, b.data, plan.a, a.data,
                           plan.b, &beta, out.data, plan.c, out.data, plan.c,
                           &plan.algo, l.workspace, l.workspaceBytes,
                           streamOf(l)),
            "matmul", error);
}

/// Reads `offsets` (group_rows') on the host, the stream waiting for
/// them, as group bounds over `rows`.
bool hostBounds(const TensorRef &offsets, int64_t rows, LaunchContext &l,
                std::vector<int64_t> &bounds, std::string &error) {
  std::vector<int64_t> raw(offsets.numElements());
  if (!check(cudaMemcpyAsync(raw.data(), offsets.data,
                             raw.size() * sizeof(int64_t),
                             cudaMemcpyDeviceToHost, streamOf(l)),
             "group offsets", error) ||
      !check(cudaStreamSynchronize(streamOf(l)), "group offsets", error))
    return false;
  bounds = artifact::groupBounds(raw.data(), raw.size() - 1, rows);
  return true;
}

/// grouped_matmul: one product per group (its rows times its weight),
/// the rows outside every group zeroed; segment_matmul: one group's
/// rows of both operands, contracted.
bool grouped(const Step &step, const std::vector<TensorRef> &in,
             const TensorRef &out, LaunchContext &l, std::string &error) {
  int64_t rows = in[0].shape[0];
  size_t size = dtypeSize(in[0].dtype);
  std::vector<int64_t> bounds;
  const TensorRef &offsets = in[step.kernel == Kernel::GroupedMatMul ? 1 : 2];
  if (!hostBounds(offsets, rows, l, bounds, error))
    return false;
  auto rowsOf = [&](const TensorRef &t, int64_t from, int64_t n) {
    return TensorRef{t.dtype,
                     {n, t.shape[1]},
                     static_cast<char *>(t.data) + from * t.shape[1] * size};
  };
  Step plain = step;
  plain.kernel = Kernel::MatMul;
  if (step.kernel == Kernel::SegmentMatMul) {
    int64_t e = step.ints.at(0), from = bounds[e], n = bounds[e + 1] - from;
    if (n == 0)
      return check(
          cudaMemsetAsync(out.data, 0, out.numElements() * size, streamOf(l)),
          "segment_matmul", error);
    plain.ints = {1, 0};
    return matmul(plain, rowsOf(in[0], from, n), rowsOf(in[1], from, n), out, l,
                  error);
  }
  int64_t cols = out.shape[1];
  char *y = static_cast<char *>(out.data);
  if (!check(cudaMemsetAsync(y, 0, bounds.front() * cols * size, streamOf(l)),
             "grouped_matmul", error) ||
      !check(cudaMemsetAsync(y + bounds.back() * cols * size, 0,
                             (rows - bounds.back()) * cols * size, streamOf(l)),
             "grouped_matmul", error))
    return false;
  plain.ints = {0, step.ints.at(0)};
  for (size_t e = 0; e + 1 < bounds.size(); ++e) {
    int64_t from = bounds[e], n = bounds[e + 1] - from;
    if (n > 0 && !matmul(plain, rowsOf(in[0], from, n), in[2 + e],
                         rowsOf(out, from, n), l, error))
      return false;
  }
  return true;
}

} // namespace

STRATA_KERNEL_FAMILY(launchMatMul) {
  (void)ctx;
  if (step.kernel == Kernel::GroupedMatMul ||
      step.kernel == Kernel::SegmentMatMul)
    return grouped(step, in, out[0], l, error);
  if (step.kernel != Kernel::MatMul)
    return std::nullopt;
  if (in.size() < 3)
    return matmul(step, in[0], in[1], out[0], l, error);
  // With a count of live rows (matrices; the validator checked): the count
  // is read on the host (the stream waits for it) and the product covers
  // only those rows, the result's other rows zeroed.
  int64_t rows = 0;
  if (!check(cudaMemcpyAsync(&rows, in[2].data, sizeof(rows),
                             cudaMemcpyDeviceToHost, streamOf(l)),
             "matmul rows", error) ||
      !check(cudaStreamSynchronize(streamOf(l)), "matmul rows", error))
    return false;
  int64_t stored = in[0].shape[0];
  rows = std::clamp<int64_t>(rows, 0, stored);
  bool ta = !step.ints.empty() && step.ints[0] != 0;
  TensorRef live{in[0].dtype, {rows, in[0].shape[1]}, in[0].data};
  size_t size = dtypeSize(out[0].dtype);
  if (!ta) {
    TensorRef head{out[0].dtype, {rows, out[0].shape[1]}, out[0].data};
    if (rows > 0 && !matmul(step, live, in[1], head, l, error))
      return false;
    return check(cudaMemsetAsync(static_cast<char *>(out[0].data) +
                                     rows * out[0].shape[1] * size,
                                 0, (stored - rows) * out[0].shape[1] * size,
                                 streamOf(l)),
                 "matmul rows", error);
  }
  if (rows == 0)
    return check(cudaMemsetAsync(out[0].data, 0, out[0].numElements() * size,
                                 streamOf(l)),
                 "matmul rows", error);
  TensorRef liveB{in[1].dtype, {rows, in[1].shape[1]}, in[1].data};
  return matmul(step, live, liveB, out[0], l, error);
}

} // namespace strata::cuda::kernels
