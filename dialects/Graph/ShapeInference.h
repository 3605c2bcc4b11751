//===- ShapeInference.h - Shape rules of graph ops -------------*- C++ -*-===//
//
// The shape rules of the graph ops, as plain functions over dimension lists.
// Verifiers and the ONNX importer share them, so what the importer builds is
// what the verifier accepts. Free of MLIR types on purpose.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECTS_GRAPH_SHAPEINFERENCE_H
#define STRATA_DIALECTS_GRAPH_SHAPEINFERENCE_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata::graph {

using Shape = std::vector<int64_t>;

/// NumPy broadcast of several shapes; nullopt if they are incompatible.
std::optional<Shape> broadcastShapes(const std::vector<Shape> &shapes);

/// Whether `from` broadcasts (one way) to `to`.
bool broadcastsTo(const Shape &from, const Shape &to);

/// numpy.matmul result shape; nullopt with `why` set on mismatch. With
/// `transposeLhs`/`transposeRhs` the last two dimensions of that operand
/// (of rank >= 2) are swapped first.
std::optional<Shape> matmulShape(const Shape &lhs, const Shape &rhs,
                                 std::string *why = nullptr,
                                 bool transposeLhs = false,
                                 bool transposeRhs = false);

/// Result of reducing `axes` (normalised) of `shape`.
Shape reduceShape(const Shape &shape, const std::vector<int64_t> &axes,
                  bool keepdims);

/// Result of ONNX Gather along `axis` (normalised).
Shape gatherShape(const Shape &data, const Shape &indices, int64_t axis);

/// Maps a possibly negative axis into [0, rank); nullopt if out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Number of elements.
/// The product of the dimensions; -1 when one is negative (dynamic) or the
/// product overflows int64.
int64_t numElements(const Shape &shape);

} // namespace strata::graph

#endif // STRATA_DIALECTS_GRAPH_SHAPEINFERENCE_H
