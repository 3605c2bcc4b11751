//===- FusePatterns.cpp - Decomposed functions become their fused ops -----===//
//
// See FusePatternsPass in Passes.td. Exporters spell a GELU as a chain of
// elementwise ops, in many orders and associations:
//
//   %x2 = graph.mul %x, %x   %x3 = graph.mul %x, %x2   %a = graph.mul %c1, %x3
//   %b = graph.add %x, %a    %s = graph.mul %c2, %b    %t = graph.tanh %s
//   %u = graph.add %c3, %t   %v = graph.mul %x, %u     %y = graph.mul %v, %c4
//
// The pass recognises such a chain by what it computes rather than by how it
// is written: a closed subgraph of elementwise ops whose only inputs are one
// value x and scalar constants is evaluated (in double) at probe points and
// compared with each known function. A match becomes one op, here
//
//   %y = graph.gelu %x tanh : tensor<...>
//
// whose kernel and gradient make one pass over memory each instead of nine.
// Then the structural recognisers run: layer norms and RMSNorms written out
// (FuseNorm.cpp) and attention chains (FuseAttention.cpp). Remaining `pow`
// by a small integer constant becomes multiplies.
//
//===----------------------------------------------------------------------===//

#include "passes/fusion/FusePatterns.h"
#include "dialects/Graph/GraphOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <optional>

namespace strata {
#define GEN_PASS_DEF_FUSEPATTERNSPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::graph;

namespace {

/// The elementwise ops a recognised function may be written with.
bool isElementwise(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, PowOp, NegOp, ExpOp, LogOp, SqrtOp,
             ReciprocalOp, TanhOp, ErfOp, SigmoidOp>(op);
}

/// One op of a subgraph applied to doubles.
double apply(Operation *op, double a, double b) {
  return TypeSwitch<Operation *, double>(op)
      .Case([&](AddOp) { return a + b; })
      .Case([&](SubOp) { return a - b; })
      .Case([&](MulOp) { return a * b; })
      .Case([&](DivOp) { return a / b; })
      .Case([&](PowOp) { return std::pow(a, b); })
      .Case([&](NegOp) { return -a; })
      .Case([&](ExpOp) { return std::exp(a); })
      .Case([&](LogOp) { return std::log(a); })
      .Case([&](SqrtOp) { return std::sqrt(a); })
      .Case([&](ReciprocalOp) { return 1 / a; })
      .Case([&](TanhOp) { return std::tanh(a); })
      .Case([&](ErfOp) { return std::erf(a); })
      .Case([&](SigmoidOp) { return 1 / (1 + std::exp(-a)); })
      .Default([](Operation *) { return NAN; });
}

/// The most ops a recognised subgraph may have.
constexpr size_t kMaxOps = 24;

/// The ops between `x` and `root`: every op reachable from `root` through
/// operands without passing `x`. Empty unless the subgraph is closed: its
/// only inputs are `x` and splat constants, it has only elementwise ops,
/// and nothing outside uses a value of it but the root's.
SmallVector<Operation *> closedSubgraph(Operation *root, Value x) {
  llvm::SetVector<Operation *> ops;
  SmallVector<Operation *> work{root};
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!ops.insert(op))
      continue;
    if (ops.size() > kMaxOps || !isElementwise(op))
      return {};
    for (Value v : op->getOperands()) {
      if (v == x || splatFloatValue(v))
        continue;
      Operation *def = v.getDefiningOp();
      if (!def)
        return {};
      work.push_back(def);
    }
  }
  for (Operation *op : ops)
    if (op != root)
      for (Operation *user : op->getUsers())
        if (!ops.contains(user))
          return {};
  // In program order, so that evaluating in turn sees operands first.
  SmallVector<Operation *> ordered(ops.begin(), ops.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

/// The subgraph's value at x = `at`.
double evaluate(ArrayRef<Operation *> ops, Value x, double at) {
  llvm::DenseMap<Value, double> values;
  values[x] = at;
  auto operand = [&](Value v) {
    if (auto c = splatFloatValue(v))
      return *c;
    return values.lookup(v);
  };
  for (Operation *op : ops)
    values[op->getResult(0)] =
        apply(op, operand(op->getOperand(0)),
              op->getNumOperands() > 1 ? operand(op->getOperand(1)) : 0.0);
  return values.lookup(ops.back()->getResult(0));
}

/// A function the pass can put one op in place of.
struct Known {
  double (*f)(double);
  bool tanhGelu;
};

double geluTanh(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double geluErf(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

constexpr Known kKnown[] = {{geluTanh, true}, {geluErf, false}};

/// Whether `ops` computes `known` of x: equal at every probe point within
/// what float32 constants (0.044715, sqrt(2/pi) rounded) change.
bool computes(ArrayRef<Operation *> ops, Value x, const Known &known) {
  static const double probes[] = {-7.5,  -4,    -2.25, -1.3, -0.8, -0.35,
                                  -0.05, -1e-3, 0,     1e-3, 0.07, 0.4,
                                  0.95,  1.6,   2.7,   5,    9.5};
  for (double p : probes) {
    double got = evaluate(ops, x, p), want = known.f(p);
    if (!(std::fabs(got - want) <= 1e-5 * std::max(1.0, std::fabs(want))))
      return false;
  }
  return true;
}

/// The values a recognised subgraph under `root` may take as its input:
/// the operands of the elementwise ops above it, nearest first.
SmallVector<Value> inputCandidates(Operation *root) {
  SmallVector<Value> candidates;
  llvm::SetVector<Operation *> seen;
  SmallVector<Operation *> work{root};
  while (!work.empty() && seen.size() <= kMaxOps) {
    Operation *op = work.front();
    work.erase(work.begin());
    if (!seen.insert(op) || !isElementwise(op))
      continue;
    for (Value v : op->getOperands()) {
      if (splatFloatValue(v) || llvm::is_contained(candidates, v))
        continue;
      candidates.push_back(v);
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
    }
  }
  return candidates;
}

/// `pow(x, n)` for a small whole n as multiplies (and 0.5 as a square root):
/// a multiply is exact where pow is within an ulp or two, cheaper, and its
/// gradient needs no logarithm.
bool rewritePow(PowOp pow) {
  std::optional<double> n = splatFloatValue(pow.getRhs());
  Value x = pow.getLhs();
  if (!n || x.getType() != pow.getType())
    return false;
  OpBuilder b(pow);
  Location loc = pow.getLoc();
  Value r;
  if (*n == 2) {
    r = b.create<MulOp>(loc, x.getType(), x, x);
  } else if (*n == 3) {
    Value sq = b.create<MulOp>(loc, x.getType(), x, x);
    r = b.create<MulOp>(loc, x.getType(), sq, x);
  } else if (*n == 0.5) {
    r = b.create<SqrtOp>(loc, x);
  } else if (*n == 1) {
    r = x;
  } else {
    return false;
  }
  pow.replaceAllUsesWith(r);
  pow.erase();
  return true;
}

struct FusePatternsPass
    : public strata::impl::FusePatternsPassBase<FusePatternsPass> {
  using FusePatternsPassBase::FusePatternsPassBase;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      fuse(func);
  }

  void fuse(func::FuncOp func) {
    Block &body = func.getBody().front();
    unsigned gelus = 0, removed = 0, pows = 0;
    // Where the remark points: the first op fused.
    std::optional<Location> where;
    // Latest first: the first match under a root is the largest.
    SmallVector<Operation *> roots;
    for (Operation &op : body)
      if (isElementwise(&op) && op.getNumResults() == 1)
        roots.push_back(&op);
    llvm::DenseSet<Operation *> erased;
    for (Operation *root : llvm::reverse(roots)) {
      if (erased.contains(root))
        continue;
      auto type = dyn_cast<RankedTensorType>(root->getResult(0).getType());
      if (!type || !isa<FloatType>(type.getElementType()))
        continue;
      for (Value x : inputCandidates(root)) {
        // Both GELUs read x twice (as a factor and inside the tanh or erf):
        // a value read once (a chain of unary ops) is no candidate.
        if (x.getType() != type || x.hasOneUse())
          continue;
        SmallVector<Operation *> ops = closedSubgraph(root, x);
        // One op or two are not worth it and a GELU takes at least four,
        // one of them a tanh or an erf.
        if (ops.size() < 4 || llvm::none_of(ops, [](Operation *op) {
              return isa<TanhOp, ErfOp>(op);
            }))
          continue;
        const Known *match = nullptr;
        for (const Known &k : kKnown)
          if (computes(ops, x, k)) {
            match = &k;
            break;
          }
        if (!match)
          continue;
        OpBuilder b(root);
        auto gelu =
            b.create<GeluOp>(root->getLoc(), type, x,
                             match->tanhGelu ? b.getUnitAttr() : UnitAttr());
        root->getResult(0).replaceAllUsesWith(gelu.getResult());
        if (!where)
          where = gelu.getLoc();
        for (Operation *op : llvm::reverse(ops)) {
          erased.insert(op);
          op->erase();
        }
        ++gelus;
        removed += ops.size();
        break;
      }
    }
    unsigned norms = fuseLayerNorms(body, where);
    unsigned attentions = fuseAttention(body, where);
    SmallVector<PowOp> powOps(body.getOps<PowOp>());
    for (PowOp p : powOps) {
      Location loc = p.getLoc();
      if (rewritePow(p)) {
        ++pows;
        if (!where)
          where = loc;
      }
    }
    if (gelus || pows || attentions || norms) {
      auto diag = mlir::emitRemark(*where) << "fused";
      const char *sep = " ";
      if (gelus) {
        diag << sep << gelus << " GELU" << (gelus == 1 ? "" : "s") << " ("
             << removed << " elementwise ops)";
        sep = "; ";
      }
      if (norms) {
        diag << sep << norms << " layer/RMS norm" << (norms == 1 ? "" : "s");
        sep = "; ";
      }
      if (attentions) {
        diag << sep << attentions << " attention"
             << (attentions == 1 ? "" : "s")
             << " (scores, softmax and values in one kernel)";
        sep = "; ";
      }
      if (pows)
        diag << sep << pows << " pow by a constant as multiplies";
    }
  }
};

} // namespace
