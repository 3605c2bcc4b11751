//===- strata-opt.cpp - Strata's pass driver ------------------------------===//
//
// mlir-opt with the Strata dialects, passes and pipelines registered; the
// driver lit tests use.
//
//===----------------------------------------------------------------------===//

#include "dialects/Exec/ExecDialect.h"
#include "dialects/Graph/GraphDialect.h"
#include "dialects/Strata/StrataDialect.h"
#include "dialects/Train/TrainDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  strata::registerPassesAndPipelines();
  mlir::DialectRegistry registry;
  registry.insert<strata::StrataDialect, strata::graph::GraphDialect,
                  strata::train::TrainDialect, strata::exec::ExecDialect,
                  mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Strata optimizer driver\n", registry));
}
