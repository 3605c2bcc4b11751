//===- GraphDialect.h - Strata graph dialect -------------------*- C++ -*-===//

#ifndef STRATA_DIALECTS_GRAPH_GRAPHDIALECT_H
#define STRATA_DIALECTS_GRAPH_GRAPHDIALECT_H

#include "mlir/IR/Dialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

#include "dialects/Graph/GraphDialect.h.inc"

#endif // STRATA_DIALECTS_GRAPH_GRAPHDIALECT_H
