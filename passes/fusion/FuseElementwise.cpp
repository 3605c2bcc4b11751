//===- FuseElementwise.cpp - Elementwise chains become graph.fused --------===//
//
// See FuseElementwisePass in Passes.td. One walk over each function in
// program order: an elementwise op joins the group of one of its operands'
// producers when it has the group's result type and when every use of the
// group's values outside the group comes after it (then the fused op, put
// where the group's last op was, still precedes all of them and follows all
// of its inputs). Each group of two or more ops becomes a graph.fused whose
// body is the group's ops, with its inputs as block arguments and splat
// constants cloned in; its results are the values used outside.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/GraphOps.h"
#include "dialects/Strata/StrataDialect.h"
#include "passes/Passes.h"
#include "runtime/artifact/KernelContract.h"
#include "runtime/artifact/KernelTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <memory>

namespace strata {
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::graph;

namespace {

/// Whether `v` is a splat float constant (a kernel constant, not an input).
bool isSplatConstant(Value v) { return splatFloatValue(v).has_value(); }

/// The op's strata.* attributes (which part of the step it belongs to):
/// only ops that agree on them are grouped.
DictionaryAttr stepAttrs(Operation *op) {
  SmallVector<NamedAttribute> attrs;
  for (NamedAttribute a : op->getDiscardableAttrs())
    if (markers::isMarker(a))
      attrs.push_back(a);
  return DictionaryAttr::get(op->getContext(), attrs);
}

/// Whether the backends' elementwise kernel can run `op` as an instruction.
bool fusable(Operation *op) {
  if (op->getNumResults() != 1 || op->getNumRegions() != 0)
    return false;
  if (!elementwiseInstructionOf(op))
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || !isa<FloatType>(type.getElementType()))
    return false;
  for (Value v : op->getOperands())
    if (cast<ShapedType>(v.getType()).getElementType() != type.getElementType())
      return false;
  return true;
}

/// Ops a group may not span: anything outside the graph dialect (the
/// optimizer's updates write their operands in place once lowered, so a
/// read moved past one would see the new value).
bool isBarrier(Operation *op) { return !isa<GraphDialect>(op->getDialect()); }

struct Group {
  SmallVector<Operation *> ops;
  /// The position of the first op (see FuseElementwisePass::fuse).
  int64_t first = 0;
  llvm::SmallPtrSet<Operation *, 16> members;
  Type type;
  DictionaryAttr attrs;

  /// Adds what `op` reads from outside the group to `inputs` (the fused
  /// op's operands) and `constants` (splat constants, cloned into it).
  void operandsOf(Operation *op, llvm::SetVector<Value> &inputs,
                  llvm::SetVector<Operation *> &constants) const {
    for (Value v : op->getOperands()) {
      if (isSplatConstant(v))
        constants.insert(v.getDefiningOp());
      else if (!members.contains(v.getDefiningOp()))
        inputs.insert(v);
    }
  }

  /// The group's inputs and constants, as the IR is now (groups built
  /// before this one replaced some of the values it read).
  void operands(llvm::SetVector<Value> &inputs,
                llvm::SetVector<Operation *> &constants) const {
    for (Operation *op : ops)
      operandsOf(op, inputs, constants);
  }

  /// Whether `op` may join: the limits hold, and every outside use of the
  /// group's values comes after `op`.
  bool admits(Operation *op) const {
    llvm::SetVector<Value> inputs;
    llvm::SetVector<Operation *> constants;
    operands(inputs, constants);
    operandsOf(op, inputs, constants);
    if (inputs.size() > size_t(artifact::kMaxElementwiseInputs) ||
        constants.size() > size_t(artifact::kMaxElementwiseConstants) ||
        ops.size() + 1 > size_t(artifact::kMaxElementwiseInstructions))
      return false;
    for (Operation *m : ops)
      for (Operation *user : m->getResult(0).getUsers())
        if (user != op && !members.contains(user) && user->isBeforeInBlock(op))
          return false;
    return true;
  }

  void add(Operation *op) {
    ops.push_back(op);
    members.insert(op);
  }

  /// The members' values used outside the group.
  SmallVector<Value> outputs() const {
    SmallVector<Value> out;
    for (Operation *m : ops)
      for (Operation *user : m->getResult(0).getUsers())
        if (!members.contains(user)) {
          out.push_back(m->getResult(0));
          break;
        }
    return out;
  }
};

} // namespace

std::optional<artifact::Kernel>
strata::elementwiseInstructionOf(Operation *op) {
  const artifact::KernelInfo *info =
      artifact::kernelInfoByName(op->getName().stripDialect());
  int arity = 0;
  if (!info || !artifact::elementwiseInstruction(info->kernel, arity) ||
      static_cast<int>(op->getNumOperands()) != arity)
    return std::nullopt;
  return info->kernel;
}

namespace {

struct FuseElementwisePass
    : public strata::impl::FuseElementwisePassBase<FuseElementwisePass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      fuse(func);
  }

  void fuse(func::FuncOp func) {
    Block &body = func.getBody().front();
    std::vector<std::unique_ptr<Group>> groups;
    llvm::DenseMap<Operation *, Group *> groupOf;
    // Positions in the block, and the last barrier seen so far: a group
    // admits an op only when no barrier lies between them.
    int64_t position = 0, lastBarrier = -1;
    for (Operation &op : body) {
      ++position;
      if (isBarrier(&op) && !isa<func::ReturnOp>(op))
        lastBarrier = position;
      if (!fusable(&op))
        continue;
      Type type = op.getResult(0).getType();
      DictionaryAttr attrs = stepAttrs(&op);
      Group *joined = nullptr;
      for (Value v : op.getOperands()) {
        Group *g = groupOf.lookup(v.getDefiningOp());
        if (g && g->type == type && g->attrs == attrs &&
            g->first > lastBarrier && g->admits(&op)) {
          joined = g;
          break;
        }
      }
      if (!joined) {
        groups.push_back(std::make_unique<Group>());
        joined = groups.back().get();
        joined->type = type;
        joined->attrs = attrs;
        joined->first = position;
      }
      joined->add(&op);
      groupOf[&op] = joined;
    }
    unsigned chains = 0, fusedOps = 0;
    std::optional<Location> where;
    for (auto &g : groups) {
      if (g->ops.size() < 2)
        continue;
      SmallVector<Value> outputs = g->outputs();
      if (outputs.empty() ||
          outputs.size() > size_t(artifact::kMaxElementwiseOutputs))
        continue;
      if (!where)
        where = g->ops.front()->getLoc();
      build(*g, outputs);
      ++chains;
      fusedOps += g->ops.size();
    }
    if (chains)
      mlir::emitRemark(*where)
          << "fused " << chains << " elementwise chain"
          << (chains == 1 ? "" : "s") << " (" << fusedOps << " ops)";
  }

  /// Replaces the group's ops with one graph.fused yielding `outputs`.
  void build(Group &g, ArrayRef<Value> outputs) {
    Operation *last = g.ops.back();
    OpBuilder b(last);
    llvm::SetVector<Value> current;
    llvm::SetVector<Operation *> constants;
    g.operands(current, constants);
    SmallVector<Value> inputs(current.begin(), current.end());
    SmallVector<Type> resultTypes;
    for (Value v : outputs)
      resultTypes.push_back(v.getType());
    auto fused = b.create<FusedOp>(last->getLoc(), resultTypes, inputs);
    fused->setDiscardableAttrs(g.attrs);
    Block *block = b.createBlock(&fused.getBody());
    IRMapping map;
    for (Value in : inputs)
      map.map(in, block->addArgument(in.getType(), in.getLoc()));
    b.setInsertionPointToStart(block);
    for (Operation *c : constants)
      map.map(c->getResult(0), b.clone(*c)->getResult(0));
    for (Operation *op : g.ops) {
      Operation *copy = b.clone(*op, map);
      for (NamedAttribute a : g.attrs)
        copy->removeAttr(a.getName());
    }
    SmallVector<Value> yielded;
    for (Value v : outputs)
      yielded.push_back(map.lookup(v));
    b.create<YieldOp>(last->getLoc(), yielded);
    for (auto [out, to] : llvm::zip(outputs, fused.getResults())) {
      Value from = out;
      from.replaceUsesWithIf(to, [&](OpOperand &use) {
        return !g.members.contains(use.getOwner());
      });
    }
    for (Operation *op : llvm::reverse(g.ops))
      op->erase();
    for (Operation *c : constants)
      if (c->use_empty())
        c->erase();
  }
};

} // namespace
