// fuzz-npy.cpp - libFuzzer target: the .npy reader (headers, shapes, sizes).

#include "runtime/support/Npy.h"
#include "test/fuzz/FuzzInput.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  strata::fuzz::MemoryFile file(data, size);
  strata::npy::Array array;
  std::string error;
  if (strata::npy::readFile(file.path(), array, error)) {
    // What was read must be self-consistent: a writer round trip accepts it.
    int64_t n = array.numElements();
    if (n < 0 || static_cast<uint64_t>(n) * strata::dtypeSize(array.dtype) !=
                     array.data.size())
      __builtin_trap();
  } else if (error.empty()) {
    __builtin_trap(); // Every refusal says why.
  }
  return 0;
}
