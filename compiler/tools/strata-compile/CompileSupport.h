//===- CompileSupport.h - strata-compile's pieces besides main --*- C++ -*-===//
//
// What the compile driver does around the pipeline: reading the input
// specs (--input-shape, --input-value) into import options, dumping IR
// (--print-ir-after-all, --dump-ir) and checking the finished plan against
// the memory budgets (--gpu-mem, --cpu-mem) with errors that say what takes
// the room.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_COMPILER_TOOLS_STRATA_COMPILE_COMPILESUPPORT_H
#define STRATA_COMPILER_TOOLS_STRATA_COMPILE_COMPILESUPPORT_H

#include "compiler/import/OnnxImporter.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassInstrumentation.h"

#include <string>
#include <vector>

namespace strata::compile {

/// Adds `--input-shape NAME=DIMS` and `--input-value NAME=FILE.npy` specs
/// to `options`; false with `error` naming the flag and the spec.
bool addInputSpecs(const std::vector<std::string> &shapes,
                   const std::vector<std::string> &values,
                   ImportOptions &options, std::string &error);

/// How IR is printed: large constants elided unless `weights`.
mlir::OpPrintingFlags printingFlags(bool weights);

/// Writes the IR after every pass into a numbered file of a directory.
class DumpIRInstrumentation : public mlir::PassInstrumentation {
public:
  DumpIRInstrumentation(std::string dir, bool weights)
      : dir(std::move(dir)), weights(weights) {}

  /// Writes `op` as the next file, named after `stage`.
  void write(mlir::Operation *op, llvm::StringRef stage);

  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override;

private:
  std::string dir;
  bool weights;
  int counter = 0;
};

/// The device region the plan needs against `tiers.gpuMem` (the arena and
/// the resident parameters); failure with an error when it is over.
mlir::LogicalResult checkDeviceBudget(mlir::ModuleOp module,
                                      const TierOptions &tiers);

/// The host region the plan needs against `tiers.cpuMem`: failure with an
/// error naming what takes the room (stored parameters and states, which
/// --place-params and --place-states force there regardless of the budget;
/// swapped activations and gradients; gradients landed for updates on the
/// CPU) when it is over.
mlir::LogicalResult checkHostBudget(mlir::ModuleOp module,
                                    const TierOptions &tiers);

} // namespace strata::compile

#endif // STRATA_COMPILER_TOOLS_STRATA_COMPILE_COMPILESUPPORT_H
