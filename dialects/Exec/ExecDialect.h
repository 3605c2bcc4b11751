//===- ExecDialect.h - Strata exec dialect ---------------------*- C++ -*-===//

#ifndef STRATA_DIALECTS_EXEC_EXECDIALECT_H
#define STRATA_DIALECTS_EXEC_EXECDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"

#include "runtime/artifact/Plan.h"

#include <optional>
#include <type_traits>

// The tier and queue enums (exec::Tier, exec::Queue; stringifyTier,
// symbolizeTier, ...) and their attributes (#exec.tier<host>,
// #exec.queue<h2d>), from ExecOps.td.
#include "dialects/Exec/ExecEnums.h.inc"

#include "dialects/Exec/ExecDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Exec/ExecAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/Exec/ExecOps.h.inc"

namespace strata::exec {

/// The plan's queue for the IR's, and back (the same cases by value;
/// ExecDialect.cpp checks it).
inline artifact::Queue planQueue(Queue queue) {
  return static_cast<artifact::Queue>(static_cast<uint32_t>(queue));
}
inline Queue execQueue(artifact::Queue queue) {
  return static_cast<Queue>(static_cast<uint32_t>(queue));
}

/// The region sizes --strata-plan-memory records on a function (the
/// declared exec.arena_bytes, .params_bytes, .host_bytes, .ssd_bytes); 0
/// where absent, and `planned` false when the arena and parameter sizes are.
struct RegionSizes {
  uint64_t arena = 0, params = 0, host = 0, ssd = 0;
  bool planned = false;
  /// What the device holds: the arena and the resident parameters.
  uint64_t device() const { return arena + params; }
};
RegionSizes regionSizes(mlir::Operation *func);

/// What a buffer of the exec program holds, for the memory report and the
/// plan's slot classes (one rule for both): a gradient when it, a copy
/// fetched from it, or the swap space it is stored into is an update's
/// gradient operand; a program input; a stored parameter, optimizer state
/// or constant; workspace when the backward pass or the optimizer made it;
/// otherwise an activation. A swap space holds what is stored into it, and
/// a fetch what it fetches.
artifact::SlotClass classifyBuffer(mlir::Value value);

/// The unit attribute of a low-precision copy (exec.param with copy_of)
/// whose values were deferred (--strata-low-copies="defer-copy-values=1"): its
/// value is a zero splat, and the artifact writer rounds the master's
/// values when it stores the copy, so compiling never reads the weights.
inline constexpr llvm::StringLiteral kDeferredCopyAttr = "strata.deferred_copy";

} // namespace strata::exec

#endif // STRATA_DIALECTS_EXEC_EXECDIALECT_H
