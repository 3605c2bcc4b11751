//===- TrainDialect.h - Strata train dialect -------------------*- C++ -*-===//

#ifndef STRATA_DIALECTS_TRAIN_TRAINDIALECT_H
#define STRATA_DIALECTS_TRAIN_TRAINDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"

#include "dialects/Train/TrainDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/Train/TrainOps.h.inc"

#endif // STRATA_DIALECTS_TRAIN_TRAINDIALECT_H
