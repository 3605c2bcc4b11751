//===- GroupExperts.cpp - Routed experts as one grouped product -----------===//
//
// See GroupExpertsPass in Passes.td. The steps, per one-hot:
//
//  1. Masks that are classes of one one-hot (maskClass): the mask of a
//     compact_rows is, through reshapes, `not(equal(x, off))` (or x itself
//     when x is i1), x a `graph.gather` of one constant class from a
//     one-hot M (through transposes and casts that keep "off"), M
//     `select(equal(i, iota), on, off)` or `equal(i, iota)` with the iota
//     along the gathered axis. Each position of M holds "on" in at most one
//     class, so masks of different classes of the same M, through the same
//     views, never hold at one position.
//  2. Which of those compact_rows each later op depends on (a bit per
//     expert). Expert e's ops are those that depend on its rows alone; the
//     running total's adds depend on experts 0..e. Expert 0's ops are the
//     template, its one op whose result the next add takes is the combine:
//     a graph.add of the total and a scatter-add (gather_grad) of the
//     rows, which feeds nothing else. The importer lets only ops that treat
//     such rows one by one touch them, so the scatter-add of one buffer of
//     every expert's rows is the sum of the experts' scatters.
//  3. Every other expert's ops are checked against the template, op by op
//     in program order: the same op, attributes and types, operands that
//     are the template's own values mapped, the same values outside, or
//     equal constants; an operand that differs is allowed only as the
//     matrix of a product over the expert's rows (`graph.matmul ... rows
//     %count`): that expert's weight. No value of an expert is used
//     outside its ops and the running total.
//  4. The template is cloned after the last add, over group_rows' buffer,
//     its products by per-expert weights as one grouped_matmul, its combine
//     taking the running total's initial value; the last add's uses take
//     the clone's, and the experts' ops and the chain are erased.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/BitVector.h"

#include <map>

namespace strata {
#define GEN_PASS_DEF_GROUPEXPERTSPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata::graph;

namespace {

/// Where a compact_rows' mask comes from: class `index` of a one-hot
/// `root`, through the views that `path` describes.
struct MaskClass {
  Value root;
  int64_t index = 0;
  std::string path;
};

/// A splat constant's value as a double, or nullopt.
std::optional<double> splatValue(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat())
    return std::nullopt;
  if (isa<FloatType>(attr.getElementType()))
    return attr.getSplatValue<APFloat>().convertToDouble();
  if (attr.getElementType().isInteger(1))
    return attr.getSplatValue<bool>() ? 1.0 : 0.0;
  return double(attr.getSplatValue<APInt>().getSExtValue());
}

/// Whether `v` is a constant 0, 1, ..., n-1 along one axis (every other
/// dimension 1); that axis.
std::optional<int64_t> iotaAxis(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) ||
      !isa<IntegerType>(attr.getElementType()))
    return std::nullopt;
  ArrayRef<int64_t> shape = cast<ShapedType>(v.getType()).getShape();
  std::optional<int64_t> axis;
  for (auto [d, n] : llvm::enumerate(shape)) {
    if (n == 1)
      continue;
    if (axis)
      return std::nullopt;
    axis = int64_t(d);
  }
  if (!axis) // One class: axis of length 1 (any).
    return std::nullopt;
  int64_t i = 0;
  for (const APInt &x : attr.getValues<APInt>())
    if (x.getSExtValue() != i++)
      return std::nullopt;
  return axis;
}

/// The one-hot `m` is: `select(equal(i, iota), on, off)` or
/// `equal(i, iota)` (on true, off false), with the iota along the class
/// axis and `i` of length 1 there. Its class axis and "off" value.
std::optional<std::pair<int64_t, double>> oneHot(Value m) {
  double off = 0.0;
  Value hit = m;
  if (auto select = m.getDefiningOp<SelectOp>()) {
    std::optional<double> on = splatValue(select.getOnTrue()),
                          offValue = splatValue(select.getOnFalse());
    if (!on || !offValue || *on == *offValue)
      return std::nullopt;
    off = *offValue;
    hit = select.getCondition();
    if (cast<ShapedType>(hit.getType()).getShape() !=
        cast<ShapedType>(m.getType()).getShape())
      return std::nullopt;
  } else if (!cast<ShapedType>(m.getType()).getElementType().isInteger(1)) {
    return std::nullopt;
  }
  auto equal = hit.getDefiningOp<EqualOp>();
  if (!equal)
    return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    Value iota = side ? equal.getLhs() : equal.getRhs();
    Value index = side ? equal.getRhs() : equal.getLhs();
    std::optional<int64_t> axis = iotaAxis(iota);
    if (!axis)
      continue;
    auto iotaShape = cast<ShapedType>(iota.getType()).getShape();
    auto outShape = cast<ShapedType>(hit.getType()).getShape();
    auto indexShape = cast<ShapedType>(index.getType()).getShape();
    // Right-aligned broadcasting: the index has length 1 (or no
    // dimension) along the class axis.
    int64_t fromRight = int64_t(iotaShape.size()) - *axis;
    int64_t outAxis = int64_t(outShape.size()) - fromRight;
    int64_t indexAxis = int64_t(indexShape.size()) - fromRight;
    if (indexAxis >= 0 && indexShape[indexAxis] != 1)
      continue;
    return std::make_pair(outAxis, off);
  }
  return std::nullopt;
}

/// Step 1: the class of a compact_rows' mask, when it is one.
std::optional<MaskClass> maskClass(CompactRowsOp compact) {
  MaskClass c;
  llvm::raw_string_ostream path(c.path);
  Value v = compact.getMask();
  while (auto reshape = v.getDefiningOp<ReshapeOp>()) {
    path << "reshape " << reshape.getInput().getType() << ";";
    v = reshape.getInput();
  }
  // The test against "off": not(equal(x, off)) or an i1 x.
  std::optional<double> tested;
  if (auto notOp = v.getDefiningOp<NotOp>()) {
    auto equal = notOp.getInput().getDefiningOp<EqualOp>();
    if (!equal)
      return std::nullopt;
    tested = splatValue(equal.getRhs());
    v = equal.getLhs();
    if (!tested) {
      tested = splatValue(equal.getLhs());
      v = equal.getRhs();
    }
    if (!tested)
      return std::nullopt;
    path << "nonzero " << *tested << ";";
  } else if (!cast<ShapedType>(v.getType()).getElementType().isInteger(1)) {
    return std::nullopt;
  }
  // Casts that keep "off" (checked below: only an off of 0, or none).
  bool throughCast = false;
  while (auto c2 = v.getDefiningOp<CastOp>()) {
    path << "cast " << c2.getInput().getType() << ";";
    v = c2.getInput();
    throughCast = true;
  }
  auto gather = v.getDefiningOp<GatherOp>();
  if (!gather)
    return std::nullopt;
  std::optional<double> index = splatValue(gather.getIndices());
  if (!index ||
      cast<ShapedType>(gather.getIndices().getType()).getNumElements() != 1)
    return std::nullopt;
  int64_t axis = int64_t(gather.getAxis());
  path << "gather " << axis << " " << gather.getIndices().getType() << ";";
  Value m = gather.getData();
  // Transposes and casts between the one-hot and the gather: follow the
  // gathered axis back.
  while (true) {
    if (auto t = m.getDefiningOp<TransposeOp>()) {
      path << "transpose";
      for (int64_t p : t.getPerm())
        path << " " << p;
      path << ";";
      axis = t.getPerm()[axis];
      m = t.getInput();
      continue;
    }
    if (auto c2 = m.getDefiningOp<CastOp>()) {
      path << "cast " << c2.getInput().getType() << ";";
      m = c2.getInput();
      throughCast = true;
      continue;
    }
    break;
  }
  std::optional<std::pair<int64_t, double>> hot = oneHot(m);
  if (!hot || hot->first != axis)
    return std::nullopt;
  double off = hot->second;
  // The mask holds where the class holds "on": the test is against "off"
  // (an i1 one-hot is its own test), and casts keep an off of 0.
  if (tested ? *tested != off : off != 0.0)
    return std::nullopt;
  if (throughCast && off != 0.0)
    return std::nullopt;
  c.root = m;
  c.index = int64_t(*index);
  return c;
}

/// One group: compact_rows of classes of one one-hot through one path.
struct Group {
  SmallVector<CompactRowsOp> members; ///< In class order.
};

/// Whether ops `a` (the template's) and `b` are the same op but for their
/// operands.
bool sameOp(Operation *a, Operation *b) {
  return a->getName() == b->getName() &&
         a->getNumOperands() == b->getNumOperands() &&
         a->getNumRegions() == 0 && b->getNumRegions() == 0 &&
         a->getResultTypes() == b->getResultTypes() &&
         a->getAttrDictionary() == b->getAttrDictionary();
}

/// 0, 1, ..., n-1.
SmallVector<unsigned> identity(unsigned n) {
  SmallVector<unsigned> order(n);
  for (unsigned i = 0; i < n; ++i)
    order[i] = i;
  return order;
}

/// A binary op whose operands may come in either order.
bool isSwappable(Operation *op) {
  return op->getNumOperands() == 2 &&
         op->hasTrait<mlir::OpTrait::IsCommutative>();
}

bool sameConstant(Value a, Value b) {
  auto ca = a.getDefiningOp<ConstantOp>(), cb = b.getDefiningOp<ConstantOp>();
  return ca && cb && ca.getValue() == cb.getValue();
}

struct GroupExpertsPass
    : public strata::impl::GroupExpertsPassBase<GroupExpertsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || !func.getBody().hasOneBlock())
        continue;
      grouped_ = experts_ = savedRows_ = 0;
      for (Group &group : groupsOf(func.getBody().front()))
        if (std::optional<std::string> why = rewrite(group))
          func.emitRemark()
              << "routed experts: " << group.members.size()
              << " experts of a router left as they are (" << *why << ")";
      if (grouped_)
        func.emitRemark() << "routed experts: the " << experts_
                          << " experts of " << grouped_ << " router"
                          << (grouped_ == 1 ? "" : "s")
                          << " each compute over one buffer of their rows "
                             "(grouped products; "
                          << savedRows_ << " fewer rows planned)";
    }
  }

private:
  int64_t grouped_ = 0, experts_ = 0, savedRows_ = 0;

  /// Step 1 for every compact_rows of `block`: groups of two or more
  /// classes of one one-hot through one path, in program order.
  std::vector<Group> groupsOf(Block &block) {
    // By one-hot and path, in program order.
    std::map<std::pair<void *, std::string>, size_t> index;
    std::vector<std::map<int64_t, CompactRowsOp>> byRoot;
    for (auto compact : block.getOps<CompactRowsOp>())
      if (std::optional<MaskClass> c = maskClass(compact)) {
        auto [it, added] =
            index.emplace(std::make_pair(c->root.getAsOpaquePointer(), c->path),
                          byRoot.size());
        if (added)
          byRoot.emplace_back();
        auto &classes = byRoot[it->second];
        if (!classes.emplace(c->index, compact).second)
          classes[c->index] = nullptr; // Two of one class: not a partition.
      }
    std::vector<Group> groups;
    for (auto &classes : byRoot) {
      Group g;
      bool ok = classes.size() >= 2;
      for (auto &[index, compact] : classes) {
        ok &= bool(compact);
        g.members.push_back(compact);
      }
      if (ok)
        groups.push_back(std::move(g));
    }
    return groups;
  }

  /// Steps 2-4; the reason when the experts are left as they are.
  std::optional<std::string> rewrite(Group &group) {
    size_t E = group.members.size();
    DenseMap<Operation *, unsigned> member;
    for (auto [e, c] : llvm::enumerate(group.members))
      member[c] = e;
    // Step 2: each op's experts (from the first member on).
    Operation *first = group.members.front();
    for (CompactRowsOp c : group.members)
      if (c->isBeforeInBlock(first))
        first = c;
    DenseMap<Operation *, llvm::BitVector> deps;
    std::vector<std::vector<Operation *>> ops(E); // deps == {e}
    for (Operation *op = first; op; op = op->getNextNode()) {
      llvm::BitVector d(E);
      if (auto it = member.find(op); it != member.end())
        d.set(it->second);
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp())
          if (auto it = deps.find(def); it != deps.end())
            d |= it->second;
      if (d.none())
        continue;
      if (op->getNumRegions())
        return std::string("an op with regions uses an expert's rows");
      // Ops of other dialects (the return) are uses outside every expert.
      if (d.count() == 1 && !member.count(op) &&
          isa<GraphDialect>(op->getDialect()))
        ops[d.find_first()].push_back(op);
      bool all = d.all();
      deps[op] = std::move(d);
      // The first op of every expert ends the walk: in the form grouped it
      // is the last add of the total, and whatever follows depends on the
      // experts only through it (an expert's op after it, or a value used
      // there, fails the checks on uses below all the same).
      if (all)
        break;
    }
    auto depsOf = [&](Operation *op) -> const llvm::BitVector * {
      auto it = deps.find(op);
      return it == deps.end() ? nullptr : &it->second;
    };
    DenseMap<Operation *, unsigned> owner; // The ops of ops[e].
    for (auto [e, list] : llvm::enumerate(ops))
      for (Operation *op : list)
        owner[op] = e;
    auto onlyExpert = [&](Operation *op, unsigned e) {
      auto it = owner.find(op);
      return it != owner.end() && it->second == e;
    };
    // The combine: expert 0's op whose result an op of experts {0, 1}
    // takes; the chain: the op of experts {0..e} that takes the previous
    // total and expert e's values.
    Operation *combine = nullptr;
    for (Operation *op : ops[0])
      for (Operation *user : op->getUsers())
        if (const llvm::BitVector *d = depsOf(user);
            d && d->count() > 1 && user != combine) {
          if (combine && combine != op)
            return std::string("expert 0's values reach two other ops");
          combine = op;
        }
    if (!combine || combine->getNumResults() != 1)
      return std::string("no running total of the experts' outputs");
    // The total must be a sum of scatter-adds of the rows: then the sum
    // over one buffer of every expert's rows is the same total. Every op
    // the importer lets touch such rows treats them one by one (views,
    // elementwise ops, gathers at their coordinates, products over other
    // axes); the one op that combines rows, the scatter-add, must feed
    // the total and nothing else.
    if (!isa<AddOp>(combine))
      return std::string("the running total is not a sum");
    for (Operation *op : ops[0]) {
      if (auto scatter = dyn_cast<GatherGradOp>(op)) {
        if (!scatter->hasOneUse() || *scatter->getUsers().begin() != combine)
          return std::string("an expert's rows are combined other than "
                             "into the running total");
      } else if (auto mm = dyn_cast<MatMulOp>(op); mm && mm.getTransposeLhs()) {
        return std::string("a product contracts an expert's rows");
      }
    }
    bool summed = llvm::any_of(combine->getOperands(), [&](Value v) {
      return isa_and_nonnull<GatherGradOp>(v.getDefiningOp()) &&
             onlyExpert(v.getDefiningOp(), 0);
    });
    if (!summed)
      return std::string("the running total does not add a scatter of the "
                         "rows");
    SmallVector<Operation *> chain{combine};
    for (size_t e = 1; e < E; ++e) {
      Value total = chain.back()->getResult(0);
      if (!total.hasOneUse())
        return std::string("a running total used twice");
      Operation *next = *total.getUsers().begin();
      // Experts 0..e exactly.
      const llvm::BitVector *d = depsOf(next);
      bool prefix = d && d->count() == e + 1;
      for (size_t k = 0; prefix && k <= e; ++k)
        prefix = d->test(k);
      if (!prefix || !sameOp(combine, next) || next->getNumResults() != 1)
        return std::string("the outputs are not added up expert by expert");
      chain.push_back(next);
    }
    // Step 3: the template (expert 0 but the combine) against each expert.
    std::vector<Operation *> tmpl;
    for (Operation *op : ops[0])
      if (op != combine)
        tmpl.push_back(op);
    CompactRowsOp c0 = group.members[0];
    // Per-expert weights of the template's products: weights[op][e].
    DenseMap<Operation *, SmallVector<Value>> weights;
    for (size_t e = 1; e < E; ++e) {
      // Expert e's ops (its add is in the chain: it depends on the
      // total, so on the experts before it).
      const std::vector<Operation *> &mine = ops[e];
      if (mine.size() != tmpl.size())
        return "expert " + std::to_string(e) + " has " +
               std::to_string(mine.size()) + " ops, expert 0 " +
               std::to_string(tmpl.size());
      IRMapping map;
      CompactRowsOp ce = group.members[e];
      map.map(c0.getOrder(), ce.getOrder());
      map.map(c0.getCount(), ce.getCount());
      for (size_t i = 0; i < tmpl.size(); ++i) {
        Operation *a = tmpl[i], *b = mine[i];
        if (!sameOp(a, b))
          return "expert " + std::to_string(e) + " computes '" +
                 b->getName().getStringRef().str() + "' where expert 0 has '" +
                 a->getName().getStringRef().str() + "'";
        // Operand k of a against operand order[k] of b (commutative ops
        // may have been canonicalized into either order).
        auto check =
            [&](ArrayRef<unsigned> order) -> std::optional<std::string> {
          for (unsigned k = 0; k < a->getNumOperands(); ++k) {
            Value x = a->getOperand(k), y = b->getOperand(order[k]);
            if (Value mapped = map.lookupOrNull(x)) {
              if (mapped != y)
                return "expert " + std::to_string(e) + "'s '" +
                       b->getName().getStringRef().str() +
                       "' takes another of its values than expert 0's";
              continue;
            }
            if (x == y || sameConstant(x, y))
              continue;
            auto mm = dyn_cast<MatMulOp>(a);
            if (mm && k == 1 && mm.getRows() == c0.getCount() &&
                !mm.getTransposeLhs() && map.contains(mm.getLhs()) &&
                !(y.getDefiningOp() && depsOf(y.getDefiningOp()))) {
              SmallVector<Value> &w = weights[a];
              if (w.empty())
                w.push_back(x);
              if (w.size() != e)
                return std::string("a product's weights differ irregularly");
              w.push_back(y);
              continue;
            }
            return "expert " + std::to_string(e) + "'s '" +
                   b->getName().getStringRef().str() + "' (operand " +
                   std::to_string(k) + ") differs from expert 0's";
          }
          return std::nullopt;
        };
        std::optional<std::string> why = check(identity(a->getNumOperands()));
        if (why && isSwappable(a))
          why = check({1, 0});
        if (why)
          return why;
        map.map(a->getResults(), b->getResults());
      }
      // The chain's add takes the previous total and expert e's values as
      // the combine takes the initial total and expert 0's.
      Operation *a = combine, *b = chain[e];
      auto carries = [&](ArrayRef<unsigned> order) {
        bool tookTotal = false;
        for (unsigned k = 0; k < a->getNumOperands(); ++k) {
          Value x = a->getOperand(k), y = b->getOperand(order[k]);
          if (Value mapped = map.lookupOrNull(x)) {
            if (mapped != y)
              return false;
            continue;
          }
          if (y == chain[e - 1]->getResult(0) && !tookTotal) {
            tookTotal = true;
            continue;
          }
          if (x != y && !sameConstant(x, y))
            return false;
        }
        return tookTotal;
      };
      if (!carries(identity(a->getNumOperands())) &&
          !(isSwappable(a) && carries({1, 0})))
        return std::string("the running total is not carried from expert to "
                           "expert by the same op");
    }
    for (auto &[op, w] : weights)
      if (w.size() != E)
        return std::string("a product's weights differ irregularly");
    if (weights.empty())
      return std::string("no product by per-expert weights");
    // No expert's value is used but by its own ops and its add (the
    // totals' single uses were checked above).
    for (size_t e = 0; e < E; ++e) {
      SmallVector<Operation *> own(ops[e].begin(), ops[e].end());
      own.push_back(group.members[e]);
      for (Operation *op : own) {
        if (op == combine)
          continue;
        for (Operation *user : op->getUsers())
          if (!onlyExpert(user, e) && user != chain[e])
            return "a value of expert " + std::to_string(e) +
                   " is used outside it";
      }
    }
    // Step 4: the template over the grouped rows, after the last add.
    Operation *last = chain.back();
    OpBuilder b(last->getContext());
    b.setInsertionPointAfter(last);
    SmallVector<Value> masks;
    int64_t expected = 0;
    bool estimated = true;
    for (CompactRowsOp c : group.members) {
      masks.push_back(c.getMask());
      if (std::optional<int64_t> x = c.getExpected())
        expected += *x;
      else
        estimated = false;
    }
    auto i64 = b.getI64Type();
    int64_t rows = cast<ShapedType>(c0.getOrder().getType()).getDimSize(0);
    auto grouping = b.create<GroupRowsOp>(
        c0.getLoc(), c0.getOrder().getType(),
        RankedTensorType::get({int64_t(E) + 1}, i64), c0.getCount().getType(),
        masks, estimated ? b.getI64IntegerAttr(expected) : IntegerAttr());
    IRMapping map;
    map.map(c0.getOrder(), grouping.getOrder());
    map.map(c0.getCount(), grouping.getCount());
    for (Operation *op : tmpl) {
      auto it = weights.find(op);
      if (it == weights.end()) {
        b.clone(*op, map);
        continue;
      }
      auto mm = cast<MatMulOp>(op);
      auto product = b.create<GroupedMatMulOp>(
          mm.getLoc(), mm.getType(), map.lookup(mm.getLhs()),
          grouping.getOffsets(), it->second, mm.getTransposeRhs());
      map.map(mm.getResult(), product.getResult());
    }
    Operation *total = b.clone(*combine, map);
    last->getResult(0).replaceAllUsesWith(total->getResult(0));
    // The experts' ops, the chain and the compact_rows, users first.
    SmallVector<Operation *> dead(chain.begin(), chain.end());
    for (size_t e = 0; e < E; ++e) {
      dead.append(ops[e].begin(), ops[e].end());
      dead.push_back(group.members[e]);
    }
    llvm::sort(
        dead, [](Operation *x, Operation *y) { return y->isBeforeInBlock(x); });
    dead.erase(std::unique(dead.begin(), dead.end()), dead.end());
    for (Operation *op : dead) {
      assert(op->use_empty() && "an expert's op is still used");
      op->erase();
    }
    ++grouped_;
    experts_ += int64_t(E);
    savedRows_ += rows * int64_t(E - 1);
    return std::nullopt;
  }
};

} // namespace
