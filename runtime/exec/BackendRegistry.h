// BackendRegistry.h - The backends this build has, by name.
//
// Above the backends (it includes each one's folder); the executor, the
// tools and the Python module find a backend here.

#ifndef STRATA_RUNTIME_EXEC_BACKENDREGISTRY_H
#define STRATA_RUNTIME_EXEC_BACKENDREGISTRY_H

#include "runtime/backends/Backend.h"

#include <memory>
#include <string>
#include <vector>

namespace strata::runtime {

/// Every backend this build has, in the order `backendNames` lists them.
const std::vector<BackendEntry> &backendRegistry();

/// The backends this build has, by name ("cpu", "async-test", and "cuda"
/// when built with the CUDA toolkit).
std::vector<std::string> backendNames();
/// The backend `name`; null with `error` when it is unknown, or cannot
/// start (no GPU: the CUDA driver's message).
std::unique_ptr<Backend> makeBackend(const std::string &name,
                                     std::string &error);
/// "cuda" when a GPU is present and this build has CUDA, else "cpu".
std::string defaultBackendName();

} // namespace strata::runtime

#endif // STRATA_RUNTIME_EXEC_BACKENDREGISTRY_H
