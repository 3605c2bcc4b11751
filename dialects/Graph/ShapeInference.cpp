//===- ShapeInference.cpp - Shape rules of graph ops ----------------------===//

#include "dialects/Graph/ShapeInference.h"

#include <algorithm>

namespace strata::graph {

std::optional<Shape> broadcastShapes(const std::vector<Shape> &shapes) {
  size_t rank = 0;
  for (const Shape &s : shapes)
    rank = std::max(rank, s.size());
  Shape result(rank, 1);
  for (const Shape &s : shapes) {
    size_t offset = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &r = result[offset + i];
      if (s[i] == r || s[i] == 1)
        continue;
      if (r != 1)
        return std::nullopt;
      r = s[i];
    }
  }
  return result;
}

bool broadcastsTo(const Shape &from, const Shape &to) {
  if (from.size() > to.size())
    return false;
  size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[offset + i])
      return false;
  return true;
}

std::optional<Shape> matmulShape(const Shape &lhs, const Shape &rhs,
                                 std::string *why, bool transposeLhs,
                                 bool transposeRhs) {
  auto fail = [&](const std::string &msg) -> std::optional<Shape> {
    if (why)
      *why = msg;
    return std::nullopt;
  };
  if (lhs.empty() || rhs.empty())
    return fail("operands must have rank >= 1");
  Shape a = lhs, b = rhs;
  if (transposeLhs && a.size() >= 2)
    std::swap(a[a.size() - 1], a[a.size() - 2]);
  if (transposeRhs && b.size() >= 2)
    std::swap(b[b.size() - 1], b[b.size() - 2]);
  bool vecLhs = a.size() == 1, vecRhs = b.size() == 1;
  if (vecLhs)
    a.insert(a.begin(), 1);
  if (vecRhs)
    b.push_back(1);
  int64_t k1 = a.back(), k2 = b[b.size() - 2];
  if (k1 != k2)
    return fail("contracting dimensions differ (" + std::to_string(k1) +
                " vs " + std::to_string(k2) + ")");
  Shape batchA(a.begin(), a.end() - 2), batchB(b.begin(), b.end() - 2);
  std::optional<Shape> batch = broadcastShapes({batchA, batchB});
  if (!batch)
    return fail("batch dimensions do not broadcast");
  Shape result = *batch;
  if (!vecLhs)
    result.push_back(a[a.size() - 2]);
  if (!vecRhs)
    result.push_back(b.back());
  return result;
}

Shape reduceShape(const Shape &shape, const std::vector<int64_t> &axes,
                  bool keepdims) {
  Shape result;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced)
      result.push_back(shape[i]);
    else if (keepdims)
      result.push_back(1);
  }
  return result;
}

Shape gatherShape(const Shape &data, const Shape &indices, int64_t axis) {
  Shape result(data.begin(), data.begin() + axis);
  result.insert(result.end(), indices.begin(), indices.end());
  result.insert(result.end(), data.begin() + axis + 1, data.end());
  return result;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  bool overflow = false, empty = false;
  for (int64_t d : shape) {
    if (d < 0)
      return -1;
    empty |= d == 0;
    overflow |= __builtin_mul_overflow(n, d, &n);
  }
  // -1 never equals a real count, so a wrapped product cannot pass for one.
  return empty ? 0 : overflow ? -1 : n;
}

} // namespace strata::graph
