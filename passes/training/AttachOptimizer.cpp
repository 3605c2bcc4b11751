//===- AttachOptimizer.cpp - Gradients to in-place optimizer updates ------===//

#include "dialects/Strata/StrataDialect.h"
#include "passes/Passes.h"
#include "runtime/support/Checked.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#define DEBUG_TYPE "strata-attach-optimizer"

namespace strata {
#define GEN_PASS_DEF_ATTACHOPTIMIZERPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct AttachOptimizerPass
    : public strata::impl::AttachOptimizerPassBase<AttachOptimizerPass> {
  using AttachOptimizerPassBase::AttachOptimizerPassBase;

  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!func) {
      getOperation().emitError("no @main function");
      return signalPassFailure();
    }
    if (optimizer != "sgd" && optimizer != "momentum" && optimizer != "adamw" &&
        optimizer != "lomo" && optimizer != "adalomo") {
      func.emitError("unknown optimizer '")
          << optimizer << "' (expected sgd, momentum, adamw, lomo or adalomo)";
      return signalPassFailure();
    }
    if (accumulate < 1) {
      func.emitError("accumulate must be at least 1");
      return signalPassFailure();
    }
    if (clipMode != "exact" && clipMode != "two-pass" &&
        clipMode != "previous-step") {
      func.emitError("unknown clip mode '")
          << clipMode << "' (exact, two-pass or previous-step)";
      return signalPassFailure();
    }
    if (failed(attach(func)))
      signalPassFailure();
  }

  static Value scalar(OpBuilder &b, Location loc, double v) {
    auto t = RankedTensorType::get({}, b.getF32Type());
    return b.create<graph::ConstantOp>(
        loc, t, DenseElementsAttr::get(t, static_cast<float>(v)));
  }

  LogicalResult attach(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    llvm::StringMap<graph::ParamOp> params;
    for (auto p : body.getOps<graph::ParamOp>())
      params[p.getName()] = p;

    SmallVector<std::pair<graph::ParamOp, Value>> updates;
    for (unsigned i = 1; i < ret.getNumOperands(); ++i) {
      auto of = func.getResultAttrOfType<StringAttr>(
          i, graph::GraphDialect::GradOfAttrHelper::getNameStr());
      if (!of)
        return func.emitError("result ") << i << " is not a gradient";
      auto it = params.find(of.getValue());
      if (it == params.end())
        return func.emitError("gradient of unknown parameter ") << of;
      updates.push_back({it->second, ret.getOperand(i)});
    }
    if (updates.empty())
      return func.emitError("no gradients to apply (run --strata-autodiff)");
    // Sharded optimizer state (--strata-data-parallel shard-optimizer):
    // each gradient is this rank's shard of the mean over `shardRanks`.
    int64_t shardRanks = 0;
    for (auto &[param, g] : updates)
      if (auto rs = g.getDefiningOp<train::ReduceScatterOp>())
        shardRanks = static_cast<int64_t>(rs.getRanks());
    if (shardRanks > 0) {
      for (auto &[param, g] : updates)
        if (!g.getDefiningOp<train::ReduceScatterOp>())
          return func.emitError("the gradient of '")
                 << param.getName()
                 << "' is not sharded while others are (reduce_scatter)";
      if (optimizer == "adalomo")
        return func.emitError(
            "adalomo's factored states (a row and a column per matrix) do "
            "not shard by elements: train it without --shard-optimizer or "
            "--shard-parameters");
    }

    llvm::DenseSet<Operation *> before;
    for (Operation &op : body)
      before.insert(&op);
    OpBuilder b(ret);
    Location loc = NameLoc::get(b.getStringAttr("optimizer"), func.getLoc());
    // Global gradient norm, in f32 whatever the parameters' type.
    auto f32Scalar = RankedTensorType::get({}, b.getF32Type());
    auto i1Scalar = RankedTensorType::get({}, b.getI1Type());

    // Loss scaling: the backward pass starts from the scale instead of 1,
    // and the updates divide it out again.
    Value lossScaleValue;
    train::StateOp scaleState, goodSteps;
    if (lossScale != "none") {
      OpBuilder sb(&body, body.begin());
      if (lossScale == "dynamic") {
        scaleState = sb.create<train::StateOp>(
            loc, f32Scalar, sb.getStringAttr("loss_scale.value"),
            sb.getF64FloatAttr(lossScaleInit));
        goodSteps = sb.create<train::StateOp>(
            loc, f32Scalar, sb.getStringAttr("loss_scale.good_steps"),
            sb.getF64FloatAttr(0.0));
        lossScaleValue = scaleState.getResult();
      } else {
        double fixed = 0;
        if (llvm::StringRef(lossScale).getAsDouble(fixed))
          fixed = 0;
        if (!(fixed > 0) || !std::isfinite(fixed))
          return func.emitError("--loss-scale must be none, dynamic or a "
                                "positive number, not '")
                 << lossScale << "'";
        lossScaleValue = scalar(sb, loc, fixed);
      }
      Operation *seed = nullptr;
      for (Operation &op : body)
        if (markers::isSeed(&op))
          seed = &op;
      if (!seed)
        return func.emitError("loss scaling needs the autodiff seed");
      Value seedValue = lossScaleValue;
      if (seed->getResult(0).getType() != f32Scalar)
        seedValue = sb.create<graph::CastOp>(loc, seed->getResult(0).getType(),
                                             lossScaleValue);
      seed->getResult(0).replaceAllUsesWith(seedValue);
    }
    // Under loss scaling the gradients are unscaled before squaring, so
    // that the sum overflows only when a gradient did.
    Value inverseScale;
    if (lossScaleValue)
      inverseScale = b.create<graph::DivOp>(loc, f32Scalar, scalar(b, loc, 1.0),
                                            lossScaleValue);
    // With accumulation each update reads its accumulator, which holds the
    // earlier micro-batches' sum; the norm (and the overflow check) is of
    // the step's whole gradient, accumulator plus this micro-batch, divided
    // by N as the updates divide it. Every micro-batch computes it (the
    // plan is one program); the last one's is the step's.
    OpBuilder stateBuilder(&body, body.begin());
    llvm::DenseMap<Operation *, train::StateOp> accumulators;
    if (accumulate > 1)
      for (auto &[param, g] : updates) {
        stateBuilder.setInsertionPointAfter(param);
        accumulators[param] = stateBuilder.create<train::StateOp>(
            param.getLoc(), g.getType(),
            stateBuilder.getStringAttr(param.getName() + ".grad_accum"),
            stateBuilder.getF64FloatAttr(0.0));
      }
    Value total;
    for (auto &[param, g] : updates) {
      auto gt = cast<RankedTensorType>(g.getType());
      Value g32 = g;
      if (accumulate > 1)
        g32 =
            b.create<graph::AddOp>(loc, gt, accumulators[param].getResult(), g);
      if (!gt.getElementType().isF32())
        g32 = b.create<graph::CastOp>(
            loc, RankedTensorType::get(gt.getShape(), b.getF32Type()), g32);
      if (inverseScale)
        g32 = b.create<graph::MulOp>(loc, g32.getType(), g32, inverseScale);
      SmallVector<int64_t> axes;
      for (int64_t d = 0; d < gt.getRank(); ++d)
        axes.push_back(d);
      Value s = b.create<graph::ReduceSumSquareOp>(
          loc, f32Scalar, g32, b.getDenseI64ArrayAttr(axes), UnitAttr());
      total = total ? b.create<graph::AddOp>(loc, f32Scalar, total, s) : s;
    }
    if (shardRanks > 0) {
      // Each rank summed the squares of its shards: the norm is of the
      // sum over the ranks (the mean, times their number). Part of the
      // backward pass, so that two-pass clipping's first pass has it too.
      auto mean = b.create<train::AllReduceOp>(loc, f32Scalar, total,
                                               b.getI64IntegerAttr(shardRanks));
      markers::setBackward(mean);
      total = b.create<graph::MulOp>(loc, f32Scalar, mean.getResult(),
                                     scalar(b, loc, double(shardRanks)));
    }
    Value norm = b.create<graph::SqrtOp>(loc, f32Scalar, total);
    if (accumulate > 1)
      norm = b.create<graph::DivOp>(loc, f32Scalar, norm,
                                    scalar(b, loc, double(accumulate)));
    Value finite;
    if (lossScaleValue) {
      // A step whose gradients overflowed has an infinite or NaN norm.
      auto inf = RankedTensorType::get({}, b.getF32Type());
      Value infinity = b.create<graph::ConstantOp>(
          loc, inf,
          DenseElementsAttr::get(inf, APFloat::getInf(APFloat::IEEEsingle())));
      finite = b.create<graph::LessOp>(loc, i1Scalar, total, infinity);
    }
    // As clip_grad_norm_: min(1, max_norm / (norm + 1e-6)).
    auto clipScale = [&](OpBuilder &at, Value n) -> Value {
      Value denom =
          at.create<graph::AddOp>(loc, f32Scalar, n, scalar(at, loc, 1e-6));
      Value coef = at.create<graph::DivOp>(
          loc, f32Scalar, scalar(at, loc, clipGradNorm), denom);
      return at.create<graph::MinOp>(loc, f32Scalar, coef,
                                     scalar(at, loc, 1.0));
    };
    Value scale;
    train::StateOp previousNorm;
    if (clipGradNorm > 0 && clipMode == "previous-step") {
      // The norm saved by the last step, known before this step's backward
      // pass; none yet (0) means no clipping.
      OpBuilder sb(&body, body.begin());
      previousNorm = sb.create<train::StateOp>(
          loc, f32Scalar, sb.getStringAttr("clip.previous_norm"),
          sb.getF64FloatAttr(0.0));
      Value known = sb.create<graph::GreaterOp>(
          loc, RankedTensorType::get({}, sb.getI1Type()),
          previousNorm.getResult(), scalar(sb, loc, 0.0));
      scale = sb.create<graph::SelectOp>(
          loc, f32Scalar, known, clipScale(sb, previousNorm.getResult()),
          scalar(sb, loc, 1.0));
    } else if (clipGradNorm > 0) {
      scale = clipScale(b, norm);
    }
    if (lossScaleValue) {
      // Unscale (and clip); an overflowed step gets 0: the updates skip.
      Value base =
          scale ? b.create<graph::MulOp>(loc, f32Scalar, scale, inverseScale)
                : inverseScale;
      scale = b.create<graph::SelectOp>(loc, f32Scalar, finite, base,
                                        scalar(b, loc, 0.0));
    }
    if ((clipGradNorm > 0 || lossScaleValue) && clipMode == "two-pass") {
      // A first backward pass, cloned ahead of the real one, computes only
      // the norm; the real pass then has its scale before its first update.
      llvm::SetVector<Operation *> first;
      for (Operation &op : body)
        if (markers::isBackward(&op) ||
            (!before.contains(&op) &&
             isa<graph::GraphDialect>(op.getDialect())))
          first.insert(&op);
      Operation *firstBackward = nullptr;
      for (Operation &op : body)
        if (markers::isBackward(&op)) {
          firstBackward = &op;
          break;
        }
      IRMapping clones;
      OpBuilder cb(firstBackward);
      for (Operation *op : first) {
        Operation *copy = cb.clone(*op, clones);
        markers::setNormPass(copy);
      }
      scale = clones.lookup(scale);
      norm = clones.lookup(norm);
      if (finite)
        finite = clones.lookup(finite);
    }

    for (auto &update : updates) {
      // Named, not a structured binding: lambdas below capture it.
      auto &param = update.first;
      auto &g = update.second;
      Location ploc = param.getLoc();
      Type t = param.getType();
      // Sharded: the update works on a copy of this rank's shard of the
      // parameter, with states of its size, and every rank's updated shard
      // is then gathered back into the parameter.
      Value target = param.getResult();
      // A sharded parameter (--shard-parameters) is this rank's shard:
      // updated where it is stored, and gathered where it is read.
      bool shardedParam = param.getShardRanks().has_value();
      if (shardRanks > 0 && !shardedParam) {
        auto gt = cast<ShapedType>(g.getType());
        t = RankedTensorType::get(gt.getShape(),
                                  cast<ShapedType>(t).getElementType());
        target = b.create<train::ShardOp>(
            NameLoc::get(b.getStringAttr(param.getName() + ".shard"), ploc), t,
            target, b.getI64IntegerAttr(shardRanks));
      }
      auto stateOf = [&](const std::string &suffix, Type type) {
        stateBuilder.setInsertionPointAfter(param);
        return stateBuilder.create<train::StateOp>(
            ploc, type, stateBuilder.getStringAttr(param.getName() + suffix),
            stateBuilder.getF64FloatAttr(0.0));
      };
      auto state = [&](const std::string &suffix) {
        return stateOf(suffix, t);
      };
      Value gs = g;
      if (accumulate > 1) {
        Value acc = accumulators[param].getResult();
        b.create<train::AccumulateOp>(ploc, acc, g);
        gs = acc;
      }
      IntegerAttr accumulateAttr = b.getI64IntegerAttr(accumulate);
      Value s = scale;
      if (s && !cast<ShapedType>(t).getElementType().isF32())
        s = b.create<graph::CastOp>(
            loc,
            RankedTensorType::get({}, cast<ShapedType>(t).getElementType()), s);
      if (optimizer == "adalomo") {
        if (s || accumulate > 1 || lossScaleValue)
          return func.emitError("adalomo supports neither clipping nor "
                                "accumulation yet");
        auto shaped = cast<ShapedType>(t);
        SmallVector<Value> states;
        if (shaped.getRank() >= 2) {
          int64_t rows = shaped.getNumElements() / shaped.getShape().back();
          Type et = shaped.getElementType();
          states.push_back(
              stateOf(".exp_avg_sq_row", RankedTensorType::get({rows}, et)));
          states.push_back(
              stateOf(".exp_avg_sq_col",
                      RankedTensorType::get({shaped.getShape().back()}, et)));
        } else {
          states.push_back(state(".exp_avg_sq"));
        }
        b.create<train::UpdateAdaLomoOp>(ploc, param.getResult(), gs, states,
                                         b.getF64FloatAttr(lr),
                                         b.getF64FloatAttr(weightDecay));
      } else if (optimizer == "sgd" || optimizer == "lomo") {
        b.create<train::UpdateSgdOp>(ploc, target, gs, s, b.getF64FloatAttr(lr),
                                     b.getF64FloatAttr(weightDecay),
                                     accumulateAttr);
      } else if (optimizer == "momentum") {
        Value buf = state(".momentum_buffer");
        b.create<train::UpdateMomentumOp>(
            ploc, target, gs, buf, s, b.getF64FloatAttr(lr),
            b.getF64FloatAttr(momentum), b.getF64FloatAttr(weightDecay),
            accumulateAttr);
      } else {
        Value m = state(".exp_avg");
        Value v = state(".exp_avg_sq");
        b.create<train::UpdateAdamWOp>(
            ploc, target, gs, m, v, s, b.getF64FloatAttr(lr),
            b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
            b.getF64FloatAttr(eps), b.getF64FloatAttr(weightDecay),
            accumulateAttr);
      }
      if (shardRanks > 0 && !shardedParam)
        b.create<train::AllGatherOp>(ploc, param.getResult(), target,
                                     b.getI64IntegerAttr(shardRanks));
    }
    if (previousNorm)
      b.create<train::AssignOp>(loc, previousNorm.getResult(), norm);
    // The scale this step used: a copy taken before the state changes.
    Value scaleUsed;
    if (lossScaleValue)
      scaleUsed = b.create<graph::MulOp>(loc, f32Scalar, lossScaleValue,
                                         scalar(b, loc, 1.0));
    if (scaleState) {
      // Dynamic scale: halve on overflow; double after `window` good steps.
      Value s = scaleState.getResult(), good = goodSteps.getResult();
      Value good1 =
          b.create<graph::AddOp>(loc, f32Scalar, good, scalar(b, loc, 1.0));
      Value grow = b.create<graph::NotOp>(
          loc, i1Scalar,
          b.create<graph::LessOp>(loc, i1Scalar, good1,
                                  scalar(b, loc, double(lossScaleWindow))));
      Value doubled =
          b.create<graph::MulOp>(loc, f32Scalar, s, scalar(b, loc, 2.0));
      // Halving starts from the largest finite float if doubling overflowed.
      Value finiteS = b.create<graph::MinOp>(
          loc, f32Scalar, s, scalar(b, loc, 3.4028234663852886e38));
      Value halved =
          b.create<graph::MulOp>(loc, f32Scalar, finiteS, scalar(b, loc, 0.5));
      Value sGood = b.create<graph::SelectOp>(loc, f32Scalar, grow, doubled, s);
      Value goodGood = b.create<graph::SelectOp>(loc, f32Scalar, grow,
                                                 scalar(b, loc, 0.0), good1);
      Value sNext =
          b.create<graph::SelectOp>(loc, f32Scalar, finite, sGood, halved);
      Value goodNext = b.create<graph::SelectOp>(loc, f32Scalar, finite,
                                                 goodGood, scalar(b, loc, 0.0));
      b.create<train::AssignOp>(loc, s, sNext);
      b.create<train::AssignOp>(loc, good, goodNext);
    }
    for (Operation &op : body)
      if (!before.contains(&op) && isa<graph::GraphDialect>(op.getDialect()) &&
          !markers::isBackward(&op))
        markers::setOptimizer(&op);
    Value loss = ret.getOperand(0);
    SmallVector<Value> results{loss, norm};
    SmallVector<Type> resultTypes{loss.getType(), f32Scalar};
    SmallVector<DictionaryAttr> attrs = {
        b.getDictionaryAttr(
            b.getNamedAttr(graph::GraphDialect::NameAttrHelper::getNameStr(),
                           b.getStringAttr("loss"))),
        b.getDictionaryAttr(
            b.getNamedAttr(graph::GraphDialect::NameAttrHelper::getNameStr(),
                           b.getStringAttr("grad_norm")))};
    if (scaleUsed) {
      results.push_back(scaleUsed);
      resultTypes.push_back(f32Scalar);
      attrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(graph::GraphDialect::NameAttrHelper::getNameStr(),
                         b.getStringAttr("loss_scale"))));
    }
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    func.setFunctionType(
        b.getFunctionType(func.getFunctionType().getInputs(), resultTypes));
    func.setAllResultAttrs(attrs);
    return success();
  }
};

} // namespace
