// fuzz-checkpoint.cpp - libFuzzer target: the checkpoint reader, against a
// small artifact (parameters on the device, state in host memory) made once
// at start-up, as its own plan's and (--resume-by-name) as another plan's.
// With STRATA_FUZZ_WRITE_SEED=FILE the target also saves a valid checkpoint
// of that artifact there, and FILE.foreign as another plan of the same
// tensors would write it: the seeds of the corpus.

#include "runtime/artifact/Artifact.h"
#include "runtime/support/Crc32c.h"
#include "runtime/support/FileUtil.h"
#include "runtime/train/Checkpoint.h"
#include "test/fuzz/FuzzInput.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unistd.h>

using namespace strata;
using namespace strata::artifact;

namespace {

std::unique_ptr<Artifact> theArtifact;

bool makeArtifact(std::string &dir, std::string &error) {
  char tmpl[] = "/tmp/strata-fuzz-ckpt-XXXXXX";
  if (!::mkdtemp(tmpl))
    return (error = "mkdtemp failed", false);
  dir = tmpl;
  Plan plan;
  plan.producer = "fuzz";
  plan.mode = "train";
  plan.arenaBytes = 64;
  plan.paramsBytes = 4096;
  plan.hostBytes = 4096;
  plan.slots.push_back(
      {"w", DType::F32, {4, 4}, Region::Params, 0, 64, SlotClass::Parameter});
  plan.slots.push_back({"m",
                        DType::F32,
                        {4, 4},
                        Region::Host,
                        0,
                        64,
                        SlotClass::OptimizerState});
  std::vector<char> params(8192, 0);
  for (int i = 0; i < 16; ++i) {
    float v = 0.25f * i;
    std::memcpy(params.data() + 4 * i, &v, 4);
  }
  plan.params.push_back(
      {"w", 0, ParamEntry::Trainable, 0, 64, crc32c(params.data(), 64)});
  plan.params.push_back(
      {"m", 1, ParamEntry::State, 4096, 64, crc32c(params.data() + 4096, 64)});
  plan.paramsFileBytes = params.size();
  return writePlan(dir + "/plan.bin", plan, error) &&
         writeFileAtomically(dir + "/params.bin", params.data(), params.size(),
                             error);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  std::string dir, error;
  theArtifact = std::make_unique<Artifact>();
  if (!makeArtifact(dir, error) || !theArtifact->open(dir, error)) {
    std::fprintf(stderr, "fuzz-checkpoint: %s\n", error.c_str());
    std::abort();
  }
  if (const char *seed = std::getenv("STRATA_FUZZ_WRITE_SEED")) {
    trainer::CheckpointInfo info;
    info.planCrc = theArtifact->plan().payloadCrc;
    info.step = 7;
    bool ok = trainer::saveCheckpoint(seed, info, *theArtifact, error);
    info.planCrc ^= 1;
    ok = ok && trainer::saveCheckpoint(std::string(seed) + ".foreign", info,
                                       *theArtifact, error);
    if (!ok) {
      std::fprintf(stderr, "fuzz-checkpoint: %s\n", error.c_str());
      std::abort();
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  strata::fuzz::MemoryFile file(data, size);
  trainer::CheckpointInfo info;
  std::string error;
  for (bool byName : {false, true}) {
    error.clear();
    if (!trainer::loadCheckpoint(file.path(), *theArtifact, info, error,
                                 byName) &&
        error.empty())
      __builtin_trap(); // Every refusal says why.
  }
  return 0;
}
