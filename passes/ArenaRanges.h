//===- ArenaRanges.h - Device-arena bytes an exec kernel touches -*- C++ -*-===//
//
// After --strata-plan-memory every buffer in the device arena has an
// offset. The transfer scheduler and the cost model need the byte ranges
// each kernel reads and writes, with the runtime's rules
// (runtime/artifact/PlanIO.cpp, arenaAccesses): update kernels write every
// arena operand in place, and SSD transfers move whole 4 KiB pages.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_PASSES_ARENARANGES_H
#define STRATA_PASSES_ARENARANGES_H

#include "dialects/Exec/ExecDialect.h"
#include "runtime/artifact/Plan.h"

#include "mlir/IR/Value.h"
#include <cstdint>
#include <optional>
#include <vector>

namespace strata {

/// Bytes of a tensor type's storage (i1 takes a byte).
uint64_t storageBytes(mlir::Type type);

/// The stored buffer behind `v` (through views): an exec.param or
/// exec.swap_space, or null for arena values.
mlir::Operation *storedRoot(mlir::Value v);

/// "device", "host" or "ssd": where `v`'s buffer lives.
llvm::StringRef tierOf(mlir::Value v);

/// Whether the kernel moves data between the device and host or SSD: a
/// fetch ("copy" of a stored value) or a write-back ("assign"/"store").
bool isTransfer(exec::KernelOp kernel);

/// The arena range of `v`, if it lives in the arena.
std::optional<artifact::ArenaRange> arenaRange(mlir::Value v,
                                              bool pageAligned = false);

/// The arena ranges `kernel` reads and writes.
void arenaAccesses(exec::KernelOp kernel,
                   std::vector<artifact::ArenaRange> &reads,
                   std::vector<artifact::ArenaRange> &writes);

} // namespace strata

#endif // STRATA_PASSES_ARENARANGES_H
