// NoCuda.cpp - The CUDA backend's entry points in builds without CUDA.

#include "runtime/backends/Backend.h"
#include "runtime/backends/cuda/CudaBackend.h"

namespace strata::runtime {

BackendEntry cudaBackendEntry() {
  return {"cuda", makeCudaBackend, /*preferred=*/true, /*built=*/false};
}

std::unique_ptr<Backend> makeCudaBackend(std::string &error) {
  error = "this build has no CUDA backend (nvcc was not found when it was "
          "configured, or -DSTRATA_ENABLE_CUDA=OFF)";
  return nullptr;
}

bool calibrateCuda(MachineProfile &, std::string &, std::string &error) {
  error = "this build has no CUDA backend";
  return false;
}

int localDevice(int) { return 0; }

std::unique_ptr<comm::Communicator> makeNcclCommunicator(comm::Communicator &,
                                                         std::string &error) {
  error = "this build has no CUDA backend, so no NCCL";
  return nullptr;
}

} // namespace strata::runtime
