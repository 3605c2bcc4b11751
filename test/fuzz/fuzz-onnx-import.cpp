// fuzz-onnx-import.cpp - libFuzzer target: the ONNX reader (protobuf to the
// importer's model) and the importer (model to the graph dialect, shape
// inference and import-time folding). Symbolic dimensions are bound to
// small sizes so that mutated graphs get past binding into the op handlers.

#include "compiler/import/OnnxImporter.h"
#include "dialects/Graph/GraphDialect.h"
#include "test/fuzz/FuzzInput.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdlib>

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  strata::fuzz::MemoryFile file(data, size);
  strata::onnx::Model model;
  std::string error;
  if (!strata::onnx::loadModel(file.path(), model, error)) {
    if (error.empty())
      __builtin_trap();
    return 0;
  }
  strata::ImportOptions options;
  for (const strata::onnx::ValueInfo &input : model.inputs)
    for (const auto &dim : input.dims)
      if (!dim.param.empty())
        options.inputShapes[dim.param] = {2};
  MLIRContext context;
  context.printOpOnDiagnostic(false);
  bool diagnosed = false;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &) {
    diagnosed = true;
    return success();
  });
  OwningOpRef<ModuleOp> module =
      strata::importOnnxModel(context, model, options);
  if (!module && !diagnosed)
    __builtin_trap(); // A failed import always says why.
  return 0;
}
