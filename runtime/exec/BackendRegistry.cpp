// BackendRegistry.cpp - The registry: every backend folder's entry.

#include "runtime/exec/BackendRegistry.h"
#include "runtime/backends/async_test/AsyncTestBackend.h"
#include "runtime/backends/cpu/CpuBackend.h"
#include "runtime/backends/cuda/CudaBackend.h"

namespace strata::runtime {

const std::vector<BackendEntry> &backendRegistry() {
  static const std::vector<BackendEntry> entries = {
      cpuBackendEntry(), asyncTestBackendEntry(), cudaBackendEntry()};
  return entries;
}

std::vector<std::string> backendNames() {
  std::vector<std::string> names;
  for (const BackendEntry &e : backendRegistry())
    if (e.built)
      names.push_back(e.name);
  return names;
}

std::unique_ptr<Backend> makeBackend(const std::string &name,
                                     std::string &error) {
  for (const BackendEntry &e : backendRegistry())
    if (name == e.name)
      return e.make(error);
  std::string known;
  for (const std::string &n : backendNames())
    known += (known.empty() ? "" : ", ") + n;
  error = "unknown backend '" + name + "' (this build has: " + known + ")";
  return nullptr;
}

std::string defaultBackendName() {
  for (const BackendEntry &e : backendRegistry()) {
    std::string ignored;
    if (e.built && e.preferred && e.make(ignored))
      return e.name;
  }
  return backendRegistry().front().name;
}

} // namespace strata::runtime
