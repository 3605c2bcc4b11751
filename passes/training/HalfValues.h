//===- HalfValues.h - Stored weights between fp32 and fp16/bf16 -*- C++ -*-===//
//
// Mixed precision changes stored weights' precision at compile time: a
// half-precision model's trainable parameters become fp32 masters
// (--strata-autocast), and the masters get the bf16 or fp16 copies the
// model reads (--strata-low-copies). Both convert with the runtime's bit
// conversions (runtime/support/Half.h), straight into a new resource blob: a
// billion-parameter model's weights pass through here.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_PASSES_TRAINING_HALFVALUES_H
#define STRATA_PASSES_TRAINING_HALFVALUES_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>

namespace strata {

/// fp16 or bf16 values widened (exactly) to an fp32 resource named `name`;
/// nullopt for another element type or data that is not available.
std::optional<mlir::ElementsAttr> widenValues(mlir::ElementsAttr attr,
                                              llvm::StringRef name);

/// fp32 values rounded to nearest even to `low` (bf16 or f16), as the
/// runtime's cast does, in a resource named `name`; nullopt for another
/// element type or data that is not available.
std::optional<mlir::ElementsAttr> narrowValues(mlir::ElementsAttr attr,
                                               mlir::FloatType low,
                                               llvm::StringRef name);

} // namespace strata

#endif // STRATA_PASSES_TRAINING_HALFVALUES_H
