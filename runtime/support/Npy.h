// Npy.h - Reading and writing NumPy .npy files.
//
// The runtime's tensor exchange format: inputs and data sets come in as .npy,
// outputs go out as .npy, so any NumPy/PyTorch script can produce and check
// them. Supports format versions 1.0-3.0, little-endian, C order.

#ifndef STRATA_RUNTIME_SUPPORT_NPY_H
#define STRATA_RUNTIME_SUPPORT_NPY_H

#include "runtime/support/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace strata::npy {

/// NumPy's descr string for a dtype ("<f4"); empty if NumPy has none (bf16).
std::string dtypeDescr(DType dtype);

struct Array {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<char> data; // Row-major, little-endian.

  int64_t numElements() const;
};

/// Reads `path`. Returns false with `error` naming the file and the problem
/// (missing file, bad magic, Fortran order, big-endian, truncated data, ...).
bool readFile(const std::string &path, Array &array, std::string &error);

/// Writes `array` to `path` atomically (temporary file, fsync, rename).
bool writeFile(const std::string &path, const Array &array, std::string &error);

/// Formats a shape as "[4, 128]".
std::string shapeString(const std::vector<int64_t> &shape);

} // namespace strata::npy

#endif // STRATA_RUNTIME_SUPPORT_NPY_H
