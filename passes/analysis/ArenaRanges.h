//===- ArenaRanges.h - Arena bytes an exec kernel touches -------*- C++ -*-===//
//
// After --strata-plan-memory every buffer in the device arena has an
// offset. The transfer scheduler and the cost model need the byte ranges
// each kernel reads and writes, with the runtime's rules
// (runtime/artifact/Plan.cpp, stepAccesses; artifact::inputUses is the
// one rule of which inputs are read and written): update kernels write the
// operands the kernel table names in place, and SSD transfers move whole
// 4 KiB pages.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_PASSES_ANALYSIS_ARENARANGES_H
#define STRATA_PASSES_ANALYSIS_ARENARANGES_H

#include "dialects/Exec/ExecDialect.h"
#include "runtime/artifact/KernelTable.h"
#include "runtime/artifact/Plan.h"
#include "runtime/artifact/StepOrder.h"

#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include <cstdint>
#include <optional>
#include <vector>

namespace strata {

/// Bytes of a tensor type's storage (i1 takes a byte).
uint64_t storageBytes(mlir::Type type);

/// The buffer `v` is a view of (through every view), or `v` itself.
mlir::Value viewRoot(mlir::Value v);

/// The stored buffer behind `v` (through views): an exec.param or
/// exec.swap_space, or null for arena values.
mlir::Operation *storedRoot(mlir::Value v);

/// "device", "host" or "ssd": where `v`'s buffer lives.
exec::Tier tierOf(mlir::Value v);

/// The name of the stored buffer behind `v` (storedRoot's: a parameter,
/// state or swap space), for messages and traces; empty for arena values.
llvm::StringRef storedName(mlir::Value v);

/// Whether the kernel moves data between the device and host or SSD: a
/// fetch ("copy" of a stored value) or a write-back ("assign"/"store").
bool isTransfer(exec::KernelOp kernel);

/// Whether `k` is an optimizer update the CPU runs: every operand in host
/// memory or on the SSD (artifact::isCpuUpdate).
bool isCpuUpdate(exec::KernelOp k);

/// A transfer kernel (Copy, Store, Assign): no ints, floats or offsets
/// yet.
exec::KernelOp createTransfer(mlir::OpBuilder &b, mlir::Location loc,
                              artifact::Kernel kernel, mlir::TypeRange results,
                              mlir::ValueRange operands);

/// The inputs `kernel` writes in place (runtime/artifact/KernelTable).
std::vector<unsigned> writtenInputs(exec::KernelOp kernel);

/// Whether `kernel` reads and writes each input (artifact::inputUses).
std::vector<artifact::InputUse> inputUses(exec::KernelOp kernel);

/// Where an update kernel's optional operands are (artifact::updateOperands).
artifact::UpdateOperands updateOperandsOf(exec::KernelOp k);

/// The arena range of `v`, if it lives in the arena.
std::optional<artifact::ArenaRange> arenaRange(mlir::Value v,
                                               bool pageAligned = false);

/// Numbers for stored buffers (exec.param, exec.swap_space) in accesses.
using StoredIds = llvm::DenseMap<mlir::Operation *, uint64_t>;

/// Everything `kernel` reads and writes: arena ranges, and each stored
/// buffer as a unit (numbered in `ids`), with the runtime's rules
/// (artifact::stepAccesses).
void stepAccesses(exec::KernelOp kernel, StoredIds &ids,
                  std::vector<artifact::Access> &reads,
                  std::vector<artifact::Access> &writes);

/// stepAccesses of each of `kernels` (a function's, in program order),
/// the stored buffers numbered across all of them.
std::vector<artifact::StepAccesses>
kernelAccesses(llvm::ArrayRef<exec::KernelOp> kernels);

/// How the runtime orders `kernels` (a function's, in program order): each
/// one's queue and waits (from --strata-assign-queues' `queue` and `waits`
/// when present, else derived by the same rule from `accesses`, their
/// kernelAccesses, found here when not given), and the issue order.
struct StepOrdering {
  std::vector<artifact::Queue> queues;
  std::vector<std::vector<uint32_t>> waits;
  std::vector<size_t> order;
};
StepOrdering
orderSteps(llvm::ArrayRef<exec::KernelOp> kernels,
           const std::vector<artifact::StepAccesses> *accesses = nullptr);

} // namespace strata

#endif // STRATA_PASSES_ANALYSIS_ARENARANGES_H
