//===- Einsum.cpp - ONNX Einsum as transposes, products and sums ----------===//
//
// An Einsum becomes graph ops autodiff already differentiates. The operands
// are contracted left to right; each pairwise step:
//
//   1. sums out, in each operand, the labels no other operand and no later
//      step needs (graph.reduce_sum);
//   2. splits the labels into batch (both operands, still needed),
//      contracted (both, not needed), and kept-in-one-operand;
//   3. with contracted labels: transposes the operands to [batch, kept,
//      contracted] and [batch, contracted, kept], views them as 3-D and
//      multiplies (graph.matmul); without: a broadcast product (graph.mul,
//      which folds when both are constants, as in rotary tables);
//
// then the result is summed and transposed to the output's labels. An
// ellipsis stands for the leading dimensions, aligned from the right; a
// label of size 1 against a larger one broadcasts; a label repeated within
// one operand takes its diagonal (times an identity, summed).
//
//===----------------------------------------------------------------------===//

#include "compiler/import/Importer.h"

#include "dialects/Graph/GraphOps.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace strata;
using namespace strata::graph;
using namespace strata::importer;

namespace {

/// A label: a letter's code, or 1000 + k for the k-th dimension of the
/// ellipsis counted from the right.
using Label = int;
using Labels = std::vector<Label>;

/// One operand: its value and the label of each dimension.
struct Term {
  Value value;
  Labels labels;
};

} // namespace

/// Parses one side of the equation ("ij", "...ij", "b...d"); `rank` expands
/// the ellipsis (-1 on the output side: it then takes `ellipsisRank`).
static bool parseTerm(const std::string &text, int64_t rank,
                      int64_t &ellipsisRank, Labels &labels,
                      std::string &error) {
  size_t dots = text.find("...");
  std::string before = text.substr(0, dots);
  std::string after =
      dots == std::string::npos ? std::string() : text.substr(dots + 3);
  for (const std::string &part : {before, after})
    for (char c : part)
      if (!std::isalpha(static_cast<unsigned char>(c))) {
        error = std::string("invalid character '") + c + "' in '" + text + "'";
        return false;
      }
  int64_t letters = static_cast<int64_t>(before.size() + after.size());
  int64_t span = 0;
  if (dots != std::string::npos) {
    span = rank < 0 ? ellipsisRank : rank - letters;
    if (span < 0) {
      error = "term '" + text + "' has more labels than its operand's rank";
      return false;
    }
    if (rank >= 0)
      ellipsisRank = std::max(ellipsisRank, span);
  } else if (rank >= 0 && letters != rank) {
    error = "term '" + text + "' has " + std::to_string(letters) +
            " labels for an operand of rank " + std::to_string(rank);
    return false;
  }
  labels.clear();
  for (char c : before)
    labels.push_back(c);
  for (int64_t k = span; k-- > 0;)
    labels.push_back(1000 + static_cast<int>(k));
  for (char c : after)
    labels.push_back(c);
  return true;
}

LogicalResult Importer::einsum(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  std::string equation;
  for (char c : stringAttr(node, "equation", ""))
    if (c != ' ')
      equation += c;
  size_t arrow = equation.find("->");
  std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> texts;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    texts.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (texts.size() != node.inputs.size())
    return nodeError(node) << "equation '" << equation << "' has "
                           << texts.size() << " operands; the node has "
                           << node.inputs.size() << " inputs";
  Location loc = nodeLoc(node);
  Type et = elementTypeOf(input(node, 0));
  std::vector<Term> terms;
  int64_t ellipsisRank = 0;
  std::string error;
  std::map<Label, int64_t> sizes;
  for (size_t i = 0; i < texts.size(); ++i) {
    Value v = input(node, i);
    if (!v || elementTypeOf(v) != et)
      return nodeError(node) << "operands must be tensors of one element "
                                "type";
    Term t{v, {}};
    if (!parseTerm(texts[i], shapeOf(v).size(), ellipsisRank, t.labels, error))
      return nodeError(node) << error;
    Shape shape = shapeOf(v);
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t &size = sizes[t.labels[d]];
      if (size > 1 && shape[d] > 1 && size != shape[d])
        return nodeError(node) << "label sizes differ: " << size << " and "
                               << shape[d] << " in '" << texts[i] << "'";
      size = std::max(size, shape[d]);
    }
    terms.push_back(std::move(t));
  }
  Labels output;
  if (arrow != std::string::npos) {
    if (!parseTerm(equation.substr(arrow + 2), -1, ellipsisRank, output, error))
      return nodeError(node) << error;
    for (Label l : output)
      if (!sizes.count(l))
        return nodeError(node) << "the output names a label no operand has";
  } else {
    // Implicit output: the ellipsis, then the letters used once, sorted.
    std::map<Label, int> uses;
    for (const Term &t : terms)
      for (Label l : t.labels)
        ++uses[l];
    for (int64_t k = ellipsisRank; k-- > 0;)
      output.push_back(1000 + static_cast<int>(k));
    for (const auto &[l, n] : uses)
      if (l < 1000 && n == 1)
        output.push_back(l);
  }

  auto shapeFor = [&](const Labels &labels) {
    Shape s;
    for (Label l : labels)
      s.push_back(sizes[l]);
    return s;
  };
  auto has = [](const Labels &labels, Label l) {
    return std::find(labels.begin(), labels.end(), l) != labels.end();
  };
  // A size-1 dimension of a label that is larger elsewhere broadcasts.
  for (Term &t : terms) {
    Shape full = shapeFor(t.labels);
    if (full != shapeOf(t.value))
      t.value = builder_.createOrFold<graph::BroadcastOp>(
          loc, tensorType(full, et), t.value);
  }
  // A label repeated within a term takes the diagonal: the term times an
  // identity matrix on the two dimensions, summed over the second.
  for (Term &t : terms) {
    for (size_t d1 = 0; d1 < t.labels.size(); ++d1) {
      for (size_t d2 = d1 + 1; d2 < t.labels.size();) {
        if (t.labels[d2] != t.labels[d1]) {
          ++d2;
          continue;
        }
        int64_t n = sizes[t.labels[d1]];
        if (n > 4096)
          return nodeError(node) << "a diagonal of " << n
                                 << " elements; at most 4096 are supported";
        Shape eyeShape(t.labels.size(), 1);
        eyeShape[d1] = eyeShape[d2] = n;
        auto eyeType = tensorType({n, n}, et);
        SmallVector<Attribute> ones;
        for (int64_t r = 0; r < n; ++r)
          for (int64_t c = 0; c < n; ++c)
            ones.push_back(
                isa<FloatType>(et)
                    ? Attribute(builder_.getFloatAttr(et, r == c))
                    : Attribute(builder_.getIntegerAttr(et, r == c)));
        Value eye =
            reshape(builder_.create<ConstantOp>(
                        loc, eyeType, DenseElementsAttr::get(eyeType, ones)),
                    eyeShape, loc);
        Value masked =
            builder_.createOrFold<MulOp>(loc, t.value.getType(), t.value, eye);
        Labels left = t.labels;
        left.erase(left.begin() + d2);
        t.value = builder_.create<ReduceSumOp>(
            loc, tensorType(shapeFor(left), et), masked,
            builder_.getDenseI64ArrayAttr({static_cast<int64_t>(d2)}),
            UnitAttr());
        t.labels = left;
      }
    }
  }
  auto sumOut = [&](Term &t, const Labels &keep) {
    SmallVector<int64_t> axes;
    Labels left;
    for (size_t d = 0; d < t.labels.size(); ++d) {
      if (has(keep, t.labels[d]))
        left.push_back(t.labels[d]);
      else
        axes.push_back(static_cast<int64_t>(d));
    }
    if (axes.empty())
      return;
    t.value = builder_.create<ReduceSumOp>(
        loc, tensorType(shapeFor(left), et), t.value,
        builder_.getDenseI64ArrayAttr(axes), UnitAttr());
    t.labels = left;
  };
  auto permute = [&](Term &t, const Labels &order) {
    if (order == t.labels)
      return;
    SmallVector<int64_t> perm;
    for (Label l : order)
      perm.push_back(std::find(t.labels.begin(), t.labels.end(), l) -
                     t.labels.begin());
    t.value = builder_.createOrFold<TransposeOp>(
        loc, tensorType(shapeFor(order), et), t.value,
        builder_.getDenseI64ArrayAttr(perm));
    t.labels = order;
  };

  Term acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    Term next = terms[i];
    // Labels needed after this step: the output's and later operands'.
    Labels needed = output;
    for (size_t j = i + 1; j < terms.size(); ++j)
      needed.insert(needed.end(), terms[j].labels.begin(),
                    terms[j].labels.end());
    Labels keepA = needed, keepB = needed;
    keepA.insert(keepA.end(), next.labels.begin(), next.labels.end());
    keepB.insert(keepB.end(), acc.labels.begin(), acc.labels.end());
    sumOut(acc, keepA);
    sumOut(next, keepB);
    Labels batch, contracted, onlyA, onlyB;
    for (Label l : acc.labels) {
      if (!has(next.labels, l))
        onlyA.push_back(l);
      else if (has(needed, l))
        batch.push_back(l);
      else
        contracted.push_back(l);
    }
    for (Label l : next.labels)
      if (!has(acc.labels, l))
        onlyB.push_back(l);
    Labels result = batch;
    result.insert(result.end(), onlyA.begin(), onlyA.end());
    result.insert(result.end(), onlyB.begin(), onlyB.end());
    Labels orderA = batch, orderB = batch;
    orderA.insert(orderA.end(), onlyA.begin(), onlyA.end());
    orderA.insert(orderA.end(), contracted.begin(), contracted.end());
    orderB.insert(orderB.end(), contracted.begin(), contracted.end());
    orderB.insert(orderB.end(), onlyB.begin(), onlyB.end());
    permute(acc, orderA);
    permute(next, orderB);
    Value product;
    if (contracted.empty()) {
      // [batch, A, 1...] * [batch, 1..., B]: a broadcast product.
      Shape a = shapeFor(batch), b = shapeFor(batch);
      for (Label l : onlyA) {
        a.push_back(sizes[l]);
        b.push_back(1);
      }
      for (Label l : onlyB) {
        a.push_back(1);
        b.push_back(sizes[l]);
      }
      product = builder_.createOrFold<MulOp>(
          loc, tensorType(shapeFor(result), et), reshape(acc.value, a, loc),
          reshape(next.value, b, loc));
    } else {
      int64_t nb = numElements(shapeFor(batch)),
              na = numElements(shapeFor(onlyA)),
              nc = numElements(shapeFor(contracted)),
              nbo = numElements(shapeFor(onlyB));
      Value m = builder_.create<MatMulOp>(
          loc, tensorType({nb, na, nbo}, et),
          reshape(acc.value, {nb, na, nc}, loc),
          reshape(next.value, {nb, nc, nbo}, loc), Value());
      product = reshape(m, shapeFor(result), loc);
    }
    acc = Term{product, result};
  }
  sumOut(acc, output);
  permute(acc, output);
  define(node, 0, acc.value);
  return success();
}
