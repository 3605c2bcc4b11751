//===- OnnxImporter.h - ONNX model to graph dialect ------------*- C++ -*-===//
//
// Imports an ONNX model (read by OnnxReader into plain data) into a module
// with one `func.func @main` of graph-dialect ops with static shapes.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_COMPILER_IMPORT_ONNXIMPORTER_H
#define STRATA_COMPILER_IMPORT_ONNXIMPORTER_H

#include "compiler/import/OnnxModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace strata {

struct ImportOptions {
  /// Static shapes for graph inputs (`input_ids` -> {4, 128}), or values for
  /// symbolic dimensions (`batch` -> {4}).
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Float initializers whose name matches one of these globs are frozen
  /// (read-only parameters) instead of trainable.
  std::vector<std::string> freezeGlobs;
  /// Graph inputs given a fixed value at compile time (`--input-value`):
  /// they become constants, so shapes that depend on them are static.
  std::map<std::string, onnx::TensorData> inputValues;
  /// Rows of a data-dependent length (a data-path NonZero's, held at their
  /// bound): true, ordered real-first at run time, the matrix products
  /// stopping at their count; false, every candidate row computed (the
  /// exported graph run densely, for comparison).
  bool compactRows = true;
};

/// Parses `NAME=D0xD1x...` (as given to --input-shape). Returns false with
/// `error` set on malformed input.
bool parseInputShapeSpec(const std::string &spec, std::string &name,
                         std::vector<int64_t> &dims, std::string &error);

/// Imports `model`. Errors are reported through the context's diagnostic
/// engine, with the node's name, op type and opset; returns null on failure.
/// All unsupported ops of the model are reported at once.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxModel(mlir::MLIRContext &context,
                                                  const onnx::Model &model,
                                                  const ImportOptions &options);

/// The ONNX op types (default domain) the importer handles, sorted, each
/// with the first opset version it is supported at.
std::vector<std::pair<std::string, int64_t>> supportedOnnxOps();

/// The range of default-domain opset versions the importer accepts. Each op
/// also has its own first supported version (--list-ops shows it). Opsets
/// 26-28 (ONNX 1.21-1.23) changed these supported ops: Range (27: 16-bit
/// types, `stash_type`), Mod (28: a float Mod with fmod=0 becomes legal;
/// it is refused), Celu, Einsum, Cast, OneHot (28: more element types) --
/// read from onnx 1.23's schemas; every other op they changed Strata does
/// not import.
constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 28;

} // namespace strata

#endif // STRATA_COMPILER_IMPORT_ONNXIMPORTER_H
