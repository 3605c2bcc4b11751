// fuzz-plan.cpp - libFuzzer target: the plan reader and validator, and the
// promise the validator makes: every step of a plan it accepts runs on the
// CPU kernels without reading or writing outside its operands. Each operand
// gets a buffer of exactly its slot's size, so AddressSanitizer reports any
// access beyond it.

#include "runtime/artifact/HtmlReport.h"
#include "runtime/artifact/Plan.h"
#include "runtime/backends/cpu/Kernels.h"
#include "runtime/support/Crc32c.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace strata;
using namespace strata::artifact;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  ::setenv("STRATA_NUM_THREADS", "1", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string file(reinterpret_cast<const char *>(data), size);
  // Mutations rarely keep the checksums right; repair them (when asked by
  // the first byte) so that the decoder and validator see damaged contents
  // behind valid checksums, as a hostile plan would have.
  constexpr size_t kHeader = 32;
  if (file.size() >= kHeader + 1 && (file[kHeader - 1] & 1)) {
    uint64_t payload = file.size() - kHeader;
    std::memcpy(&file[16], &payload, 8);
    uint32_t crc = crc32c(file.data() + kHeader, payload);
    std::memcpy(&file[24], &crc, 4);
    uint32_t headerCrc = crc32c(file.data(), kHeader - 4);
    std::memcpy(&file[28], &headerCrc, 4);
  }
  Plan plan;
  std::string error;
  if (!parsePlan(file, "fuzz", plan, error)) {
    if (error.empty())
      __builtin_trap();
    return 0;
  }
  // Whatever the validator accepts, the HTML report draws (names escaped,
  // predicted spans and memory over the step in bounds).
  if (htmlReport(plan, {}).find("<script") != std::string::npos)
    __builtin_trap();
  // Run the accepted plan's steps when its tensors are small enough to be
  // quick: the validator's guarantee does not depend on the sizes.
  uint64_t total = 0;
  for (const Slot &s : plan.slots)
    total += s.bytes;
  if (total > (uint64_t(64) << 10))
    return 0;
  std::vector<std::vector<char>> buffers(plan.slots.size());
  for (size_t i = 0; i < plan.slots.size(); ++i)
    buffers[i].assign(std::max<uint64_t>(plan.slots[i].bytes, 1), 0);
  for (const Step &step : plan.steps) {
    std::vector<TensorRef> in, out;
    for (uint32_t s : step.inputs)
      in.push_back(
          {plan.slots[s].dtype, plan.slots[s].shape, buffers[s].data()});
    for (uint32_t s : step.outputs)
      out.push_back(
          {plan.slots[s].dtype, plan.slots[s].shape, buffers[s].data()});
    // A data-dependent refusal (index out of range) is fine; a crash is not.
    cpu::runKernel(step, in, out, error);
  }
  return 0;
}
