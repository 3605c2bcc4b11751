// fuzz-compile.cpp - libFuzzer target: the whole compile of a (mutated)
// ONNX model, as strata-compile runs it: import, cleanup, the training
// pipeline when the model's first output is a float scalar (its loss), the
// lowering to exec with tier placement and the memory plan, and the
// artifact writer. Beyond "no crash": a compile that succeeds must produce
// a plan the runtime's validator accepts.

#include "compiler/import/OnnxImporter.h"
#include "compiler/serialize/ArtifactWriter.h"
#include "passes/Passes.h"
#include "test/fuzz/FuzzInput.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;

namespace {
std::string outputDir;
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  ::setenv("STRATA_NUM_THREADS", "1", 1);
  struct stat st;
  std::string base = ::stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp";
  outputDir = base + "/strata-fuzz-compile-" + std::to_string(::getpid());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  strata::fuzz::MemoryFile file(data, size);
  strata::onnx::Model model;
  std::string error;
  if (!strata::onnx::loadModel(file.path(), model, error))
    return 0;
  // Keep each input quick: big graphs are the importer target's job.
  if (model.nodes.size() > 64)
    return 0;
  strata::ImportOptions options;
  for (const strata::onnx::ValueInfo &input : model.inputs)
    for (const auto &dim : input.dims)
      if (!dim.param.empty())
        options.inputShapes[dim.param] = {2};
  MLIRContext context;
  context.printOpOnDiagnostic(false);
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    diagnostics += diag.str() + "\n";
    return success();
  });
  OwningOpRef<ModuleOp> module =
      strata::importOnnxModel(context, model, options);
  if (!module)
    return 0;
  auto func = module->lookupSymbol<func::FuncOp>("main");
  bool train = false;
  if (func && func.getNumResults() > 0)
    if (auto t = dyn_cast<RankedTensorType>(func.getResultTypes()[0]))
      train = t.getRank() == 0 && t.getElementType().isF32();
  PassManager pm(&context);
  strata::buildGraphCleanupPipeline(pm);
  if (train) {
    strata::TrainingOptions training;
    training.loss = "output";
    training.optimizer = data[size / 2] & 1 ? "adamw" : "sgd";
    strata::buildTrainingPipeline(pm, training);
  }
  strata::TierOptions tiers;
  tiers.plannerEvaluations = 8;
  strata::buildForwardToExecPipeline(pm, tiers);
  if (failed(pm.run(*module)))
    return 0;
  strata::ArtifactInfo info;
  info.mode = train ? "train" : "forward";
  diagnostics.clear();
  if (failed(strata::writeArtifact(*module, outputDir, info)) &&
      diagnostics.find("invalid plan") != std::string::npos) {
    std::fprintf(stderr, "the compiler wrote a plan its validator refuses: %s",
                 diagnostics.c_str());
    __builtin_trap();
  }
  return 0;
}
