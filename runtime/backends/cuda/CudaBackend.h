// CudaBackend.h - The CUDA backend.
//
// Device memory from cudaMalloc (one allocation per region: the arena, the
// parameter region, the cuBLASLt workspace; none in the step), a stream per
// device queue (compute, host-to-device, device-to-host), host threads for
// the SSD queues, one CUDA event per step that is waited for, and kernels
// from Kernels.cu. A device queue waiting for host work blocks the issuing
// thread until that work is done (the GPU keeps running what was already
// given to it); host work waiting for device work synchronizes on the event.
//
// Only this folder includes CUDA headers; this header includes none.

#ifndef STRATA_RUNTIME_BACKENDS_CUDA_CUDABACKEND_H
#define STRATA_RUNTIME_BACKENDS_CUDA_CUDABACKEND_H

#include "runtime/backends/Backend.h"
#include "runtime/comm/Communicator.h"
#include "runtime/profile/MachineProfile.h"

#include <memory>
#include <string>

namespace strata::runtime {

/// The registry's entry (Backend.h): preferred, and built only where
/// nvcc was found (NoCuda.cpp otherwise).
BackendEntry cudaBackendEntry();
/// The CUDA backend on device 0 (on device L mod the count for local rank
/// L of a data-parallel run: OMPI_COMM_WORLD_LOCAL_RANK or LOCAL_RANK);
/// null with the driver's message when there is no usable GPU ("no GPU:
/// ...").
std::unique_ptr<Backend> makeCudaBackend(std::string &error);

/// Measures the GPU (matrix rates by size and type, streaming kernels,
/// launch cost, pinned copies each way and both at once) into `profile`,
/// with a readable `report`; false with `error` without a usable GPU.
bool calibrateCuda(MachineProfile &profile, std::string &report,
                   std::string &error);

/// The device a process uses: local rank L of a data-parallel run
/// (OMPI_COMM_WORLD_LOCAL_RANK, else LOCAL_RANK) gets L mod `count`; a
/// process alone 0.
int localDevice(int count);

/// NCCL's all-reduce on device memory for the ranks of `bootstrap` (which
/// carries NCCL's unique id from rank 0 and the host-side collectives:
/// the loss, agreeing on the plan), on the current device and a stream of
/// its own. Null with `error` where this build has no NCCL, or NCCL does
/// not start. `bootstrap` must outlive it.
std::unique_ptr<comm::Communicator>
makeNcclCommunicator(comm::Communicator &bootstrap, std::string &error);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_BACKENDS_CUDA_CUDABACKEND_H
