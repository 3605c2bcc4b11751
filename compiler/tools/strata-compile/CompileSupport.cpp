//===- CompileSupport.cpp - strata-compile's pieces besides main ----------===//

#include "CompileSupport.h"
#include "dialects/Strata/StrataDialect.h"

#include "dialects/Exec/ExecDialect.h"
#include "passes/analysis/ArenaRanges.h"
#include "runtime/support/Npy.h"
#include "runtime/support/Size.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>

using namespace mlir;

namespace strata::compile {

/// The ONNX data type code of a runtime element type.
static int32_t onnxDataType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return onnx::kFloat;
  case DType::F64:
    return onnx::kDouble;
  case DType::F16:
    return onnx::kFloat16;
  case DType::BF16:
    return onnx::kBFloat16;
  case DType::I64:
    return onnx::kInt64;
  case DType::I32:
    return onnx::kInt32;
  case DType::I16:
    return onnx::kInt16;
  case DType::I8:
    return onnx::kInt8;
  case DType::U8:
    return onnx::kUInt8;
  case DType::U16:
    return onnx::kUInt16;
  case DType::U32:
    return onnx::kUInt32;
  case DType::U64:
    return onnx::kUInt64;
  case DType::Bool:
    return onnx::kBool;
  }
  return onnx::kUndefined;
}

bool addInputSpecs(const std::vector<std::string> &shapes,
                   const std::vector<std::string> &values,
                   ImportOptions &options, std::string &error) {
  for (const std::string &spec : shapes) {
    std::string name;
    std::vector<int64_t> dims;
    if (!parseInputShapeSpec(spec, name, dims, error)) {
      error = "--input-shape: " + error;
      return false;
    }
    options.inputShapes[name] = dims;
  }
  for (const std::string &spec : values) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      error = "--input-value expects NAME=FILE.npy, got '" + spec + "'";
      return false;
    }
    auto array = std::make_shared<npy::Array>();
    if (!npy::readFile(spec.substr(eq + 1), *array, error)) {
      error = "--input-value: " + error;
      return false;
    }
    onnx::TensorData t;
    t.name = spec.substr(0, eq);
    t.dataType = onnxDataType(array->dtype);
    t.dims = array->shape;
    t.data = array->data.data();
    t.size = array->data.size();
    t.keepAlive = array;
    options.inputValues[t.name] = t;
  }
  return true;
}

OpPrintingFlags printingFlags(bool weights) {
  OpPrintingFlags flags;
  if (!weights) {
    flags.elideLargeElementsAttrs(16);
    flags.elideLargeResourceString(64);
  }
  return flags;
}

void DumpIRInstrumentation::write(Operation *op, llvm::StringRef stage) {
  std::string path =
      llvm::formatv("{0}/{1:02}-{2}.mlir", dir, counter++, stage).str();
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    llvm::errs() << "strata-compile: warning: cannot write " << path << ": "
                 << ec.message() << "\n";
    return;
  }
  op->print(os, printingFlags(weights));
}

void DumpIRInstrumentation::runAfterPass(Pass *pass, Operation *op) {
  // Pass adaptors (which run nested pipelines) have no argument; the
  // passes they run are dumped themselves.
  if (pass->getArgument().empty())
    return;
  // Nested passes run per function; dump the whole module.
  while (op->getParentOp())
    op = op->getParentOp();
  write(op, pass->getArgument());
}

LogicalResult checkDeviceBudget(ModuleOp module, const TierOptions &tiers) {
  auto func = module.lookupSymbol<func::FuncOp>("main");
  if (!func || tiers.gpuMem == 0)
    return success();
  exec::RegionSizes regions = exec::regionSizes(func);
  uint64_t arena = regions.arena, resident = regions.params;
  if (arena + resident <= tiers.gpuMem)
    return success();
  llvm::errs() << "strata-compile: error: the plan needs "
               << formatSize(arena + resident) << " of device memory (arena "
               << formatSize(arena) << " + resident parameters "
               << formatSize(resident) << "); --gpu-mem is "
               << formatSize(tiers.gpuMem)
               << ". Even with parameters, state and swappable "
                  "activations off the device, the arena (gradients, "
                  "workspace, activations in use) needs about "
               << formatSize(arena)
               << (tiers.hasSsd || tiers.cpuMem == 0
                       ? ""
                       : "; give --ssd-dir to move more off the device")
               << "\n";
  return failure();
}

LogicalResult checkHostBudget(ModuleOp module, const TierOptions &tiers) {
  auto func = module.lookupSymbol<func::FuncOp>("main");
  uint64_t host = func ? exec::regionSizes(func).host : 0;
  if (host <= tiers.cpuMem)
    return success();
  uint64_t params = 0, states = 0;
  for (auto p : func.getBody().front().getOps<exec::ParamOp>())
    if (p.getTier() == exec::Tier::Host)
      (p.getState() ? states : params) +=
          artifact::pagePadded(storageBytes(p.getType()));
  uint64_t stored = params + states;
  llvm::errs() << "strata-compile: error: the plan needs " << formatSize(host)
               << " of host memory; --cpu-mem is " << formatSize(tiers.cpuMem)
               << ". Parameters take " << formatSize(params)
               << " of it, optimizer state " << formatSize(states)
               << ", swapped activations, "
               << "gradients and CPU-update buffers "
               << formatSize(host > stored ? host - stored : 0);
  std::string forced;
  for (auto [flag, value] :
       {std::pair{"--place-params", &tiers.placeParams},
        std::pair{"--place-states", &tiers.placeStates},
        std::pair{"--place-activations", &tiers.placeActivations},
        std::pair{"--place-gradients", &tiers.placeGradients}})
    if (*value == "host")
      forced += std::string(forced.empty() ? "" : ", ") + flag + " host";
  if (!forced.empty())
    llvm::errs() << " (" << forced << " put them there whatever the budget: "
                 << (tiers.hasSsd ? "use ssd, or auto to let the planner "
                                    "choose"
                                  : "use auto to let the planner choose, or "
                                    "give --ssd-dir and use ssd")
                 << ")";
  else if (!tiers.hasSsd)
    llvm::errs() << "; give --ssd-dir to move more to the SSD";
  llvm::errs() << "\n";
  return failure();
}

} // namespace strata::compile
