// Nccl.cpp - All-reduces, reduce-scatters and all-gathers on the GPU
// through NCCL (the CUDA toolkit's), for the CUDA backend's data-parallel
// plans. Built where CMake found NCCL (STRATA_HAVE_NCCL); elsewhere
// makeNcclCommunicator says so.

#include "runtime/backends/cuda/CudaBackend.h"

#include <cstdlib>

#ifdef STRATA_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#endif

namespace strata::runtime {

int localDevice(int count) {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"})
    if (const char *v = std::getenv(name)) {
      int local = std::atoi(v);
      return count > 0 && local > 0 ? local % count : 0;
    }
  return 0;
}

#ifdef STRATA_HAVE_NCCL
namespace {

bool ncclOk(ncclResult_t r, const char *what, std::string &error) {
  if (r == ncclSuccess)
    return true;
  error = std::string(what) + ": " + ncclGetErrorString(r);
  return false;
}

bool cudaOk(cudaError_t e, const char *what, std::string &error) {
  if (e == cudaSuccess)
    return true;
  error = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

class NcclCommunicator final : public comm::Communicator {
public:
  explicit NcclCommunicator(comm::Communicator &bootstrap)
      : bootstrap_(bootstrap) {}
  ~NcclCommunicator() override {
    if (comm_)
      ncclCommDestroy(comm_);
    if (scratch_)
      cudaFree(scratch_);
    if (stream_)
      cudaStreamDestroy(stream_);
  }

  bool start(std::string &error) {
    int count = 0;
    if (!cudaOk(cudaGetDeviceCount(&count), "no GPU", error))
      return false;
    device_ = localDevice(count);
    if (!cudaOk(cudaSetDevice(device_), "cudaSetDevice", error))
      return false;
    // Rank 0 makes the id; the bootstrap (MPI, or one process) hands it on.
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (bootstrap_.rank() == 0 &&
        !ncclOk(ncclGetUniqueId(&id), "ncclGetUniqueId", error))
      return false;
    if (!bootstrap_.broadcast(&id, sizeof(id), 0, error))
      return false;
    return cudaOk(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                  "cudaStreamCreate", error) &&
           ncclOk(ncclCommInitRank(&comm_, bootstrap_.size(), id,
                                   bootstrap_.rank()),
                  "ncclCommInitRank", error);
  }

  const char *name() const override { return "nccl"; }
  int rank() const override { return bootstrap_.rank(); }
  int size() const override { return bootstrap_.size(); }
  bool takesDeviceMemory() const override { return true; }

  bool allReduceMean(const void *in, void *out, int64_t count, DType dtype,
                     std::string &error) override {
    ncclDataType_t type;
    if (!floatType(dtype, "all_reduce", type, error))
      return false;
    if (count <= 0)
      return true;
    // On the communication queue's thread, whose current device is its own.
    if (!cudaOk(cudaSetDevice(device_), "cudaSetDevice", error))
      return false;
    // The device work before it is done (the executor's queue waited for
    // its events); the step after it waits for this queue.
    return ncclOk(ncclAllReduce(in, out, static_cast<size_t>(count), type,
                                ncclAvg, comm_, stream_),
                  "ncclAllReduce", error) &&
           cudaOk(cudaStreamSynchronize(stream_), "the all-reduce", error);
  }

  bool reduceScatterMean(const void *in, int64_t count, void *out,
                         int64_t chunk, DType dtype,
                         std::string &error) override {
    ncclDataType_t type;
    if (!floatType(dtype, "reduce_scatter", type, error))
      return false;
    if (chunk <= 0)
      return true;
    if (!cudaOk(cudaSetDevice(device_), "cudaSetDevice", error))
      return false;
    size_t bytes = dtypeSize(dtype);
    int64_t total = chunk * size();
    const void *src = in;
    if (count != total) {
      // Zero-padded to whole shards, in scratch device memory.
      if (!reserve(static_cast<size_t>(total) * bytes, error) ||
          !cudaOk(cudaMemcpyAsync(scratch_, in,
                                  static_cast<size_t>(count) * bytes,
                                  cudaMemcpyDeviceToDevice, stream_),
                  "padding the reduce-scatter", error) ||
          !cudaOk(cudaMemsetAsync(static_cast<char *>(scratch_) + count * bytes,
                                  0, static_cast<size_t>(total - count) * bytes,
                                  stream_),
                  "padding the reduce-scatter", error))
        return false;
      src = scratch_;
    }
    return ncclOk(ncclReduceScatter(src, out, static_cast<size_t>(chunk), type,
                                    ncclAvg, comm_, stream_),
                  "ncclReduceScatter", error) &&
           cudaOk(cudaStreamSynchronize(stream_), "the reduce-scatter", error);
  }

  bool allGather(const void *in, int64_t chunk, void *out, int64_t count,
                 DType dtype, std::string &error) override {
    if (chunk <= 0)
      return true;
    if (!cudaOk(cudaSetDevice(device_), "cudaSetDevice", error))
      return false;
    size_t bytes = static_cast<size_t>(chunk) * dtypeSize(dtype);
    int64_t total = chunk * size();
    void *all = out;
    if (count != total) {
      if (!reserve(bytes * static_cast<size_t>(size()), error))
        return false;
      all = scratch_;
    }
    // As bytes: any element type.
    if (!ncclOk(ncclAllGather(in, all, bytes, ncclUint8, comm_, stream_),
                "ncclAllGather", error))
      return false;
    if (all != out &&
        !cudaOk(cudaMemcpyAsync(out, all,
                                static_cast<size_t>(count) * dtypeSize(dtype),
                                cudaMemcpyDeviceToDevice, stream_),
                "the all-gather", error))
      return false;
    return cudaOk(cudaStreamSynchronize(stream_), "the all-gather", error);
  }
  bool allReduceSum(double *values, int64_t count,
                    std::string &error) override {
    return bootstrap_.allReduceSum(values, count, error);
  }
  bool agree(const std::string &what, uint64_t value,
             std::string &error) override {
    return bootstrap_.agree(what, value, error);
  }
  bool broadcast(void *data, uint64_t bytes, int root,
                 std::string &error) override {
    return bootstrap_.broadcast(data, bytes, root, error);
  }

private:
  static bool floatType(DType dtype, const char *what, ncclDataType_t &type,
                        std::string &error) {
    switch (dtype) {
    case DType::F32:
      type = ncclFloat32;
      return true;
    case DType::F64:
      type = ncclFloat64;
      return true;
    case DType::F16:
      type = ncclFloat16;
      return true;
    case DType::BF16:
      type = ncclBfloat16;
      return true;
    default:
      error = std::string(what) + " of " + dtypeName(dtype) +
              " (only f32, f64, bf16 and f16 are averaged)";
      return false;
    }
  }

  /// At least `bytes` of scratch device memory (padded shards).
  bool reserve(size_t bytes, std::string &error) {
    if (bytes <= scratchBytes_)
      return true;
    if (scratch_ && !cudaOk(cudaFree(scratch_), "cudaFree", error))
      return false;
    scratch_ = nullptr;
    scratchBytes_ = 0;
    if (!cudaOk(cudaMalloc(&scratch_, bytes), "scratch for a collective",
                error))
      return false;
    scratchBytes_ = bytes;
    return true;
  }

  comm::Communicator &bootstrap_;
  void *scratch_ = nullptr;
  size_t scratchBytes_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

} // namespace
#endif

std::unique_ptr<comm::Communicator>
makeNcclCommunicator(comm::Communicator &bootstrap, std::string &error) {
#ifdef STRATA_HAVE_NCCL
  auto nccl = std::make_unique<NcclCommunicator>(bootstrap);
  if (!nccl->start(error)) {
    error = "NCCL did not start: " + error;
    return nullptr;
  }
  return nccl;
#else
  (void)bootstrap;
  error = "this build has no NCCL (the CUDA toolkit's nccl.h and libnccl "
          "were not found when it was configured)";
  return nullptr;
#endif
}

} // namespace strata::runtime
