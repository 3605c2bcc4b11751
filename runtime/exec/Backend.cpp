// Backend.cpp - The backends this build has.

#include "runtime/exec/Backend.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/exec/AsyncTestBackend.h"
#include "runtime/exec/CpuBackend.h"

namespace strata::runtime {

bool Backend::supports(const artifact::Plan &, std::string &) const {
  return true;
}

std::vector<std::string> backendNames() {
  std::vector<std::string> names = {"cpu", "async-test"};
  if (cudaBuilt())
    names.push_back("cuda");
  return names;
}

std::unique_ptr<Backend> makeBackend(const std::string &name,
                                     std::string &error) {
  if (name == "cpu")
    return std::make_unique<CpuBackend>();
  if (name == "async-test")
    return std::make_unique<AsyncTestBackend>();
  if (name == "cuda")
    return makeCudaBackend(error);
  std::string known;
  for (const std::string &n : backendNames())
    known += (known.empty() ? "" : ", ") + n;
  error = "unknown backend '" + name + "' (this build has: " + known + ")";
  return nullptr;
}

std::string defaultBackendName() {
  if (!cudaBuilt())
    return "cpu";
  std::string ignored;
  return makeCudaBackend(ignored) ? "cuda" : "cpu";
}

} // namespace strata::runtime
