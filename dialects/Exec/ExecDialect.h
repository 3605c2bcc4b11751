//===- ExecDialect.h - Strata exec dialect ---------------------*- C++ -*-===//

#ifndef STRATA_DIALECTS_EXEC_EXECDIALECT_H
#define STRATA_DIALECTS_EXEC_EXECDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"

#include "dialects/Exec/ExecDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/Exec/ExecOps.h.inc"

#endif // STRATA_DIALECTS_EXEC_EXECDIALECT_H
