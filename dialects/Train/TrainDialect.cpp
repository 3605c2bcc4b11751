//===- TrainDialect.cpp - Strata train dialect ----------------------------===//

#include "dialects/Train/TrainDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace strata::train;

#include "dialects/Train/TrainDialect.cpp.inc"

void TrainDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Train/TrainOps.cpp.inc"
      >();
}

/// Parameter, gradient and state operands share one float tensor type; the
/// clipping scale is a float scalar.
static LogicalResult verifyUpdate(Operation *op, ValueRange same, Value scale) {
  Type type = same.front().getType();
  if (!isa<FloatType>(cast<ShapedType>(type).getElementType()))
    return op->emitOpError("updates float parameters only");
  for (Value v : same)
    if (v.getType() != type)
      return op->emitOpError("parameter, gradient and state must have type ")
             << type;
  if (scale && cast<ShapedType>(scale.getType()).getRank() != 0)
    return op->emitOpError("scale must be a scalar");
  return success();
}

LogicalResult UpdateSgdOp::verify() {
  return verifyUpdate(*this, {getParam(), getGrad()}, getScale());
}

LogicalResult UpdateMomentumOp::verify() {
  return verifyUpdate(*this, {getParam(), getGrad(), getBuffer()}, getScale());
}

LogicalResult UpdateAdamWOp::verify() {
  return verifyUpdate(
      *this, {getParam(), getGrad(), getExpAvg(), getExpAvgSq()}, getScale());
}

LogicalResult UpdateAdaLomoOp::verify() {
  if (failed(verifyUpdate(*this, {getParam(), getGrad()}, Value())))
    return failure();
  auto shape = cast<ShapedType>(getParam().getType()).getShape();
  if (shape.size() >= 2) {
    if (getStates().size() != 2)
      return emitOpError("a matrix needs row and column states");
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d)
      rows *= shape[d];
    auto r = cast<ShapedType>(getStates()[0].getType());
    auto c = cast<ShapedType>(getStates()[1].getType());
    if (r.getNumElements() != rows || c.getNumElements() != shape.back())
      return emitOpError("row/column states must have ")
             << rows << " and " << shape.back() << " elements";
  } else if (getStates().size() != 1 ||
             getStates()[0].getType() != getParam().getType()) {
    return emitOpError("a vector needs one state of its own type");
  }
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (static_cast<int64_t>(getRanks()) < 1)
    return emitOpError("needs at least one rank, not ")
           << static_cast<int64_t>(getRanks());
  if (!isa<FloatType>(getElementTypeOrSelf(getInput().getType())))
    return emitOpError("averages floats only");
  return success();
}

/// Whether `shard` has the type of one of `ranks` shards of `full`: a
/// vector of ceil(numel / ranks) elements of its element type.
static LogicalResult verifyShardOf(Operation *op, Type full, Type shard,
                                   int64_t ranks) {
  if (ranks < 1)
    return op->emitOpError("needs at least one rank, not ") << ranks;
  auto f = cast<ShapedType>(full);
  auto s = cast<ShapedType>(shard);
  if (!isa<FloatType>(f.getElementType()))
    return op->emitOpError("shards floats only");
  int64_t c = (f.getNumElements() + ranks - 1) / ranks;
  if (s.getElementType() != f.getElementType() || s.getRank() != 1 ||
      s.getDimSize(0) != c)
    return op->emitOpError("a shard of ")
           << full << " over " << ranks << " ranks is "
           << RankedTensorType::get({c}, f.getElementType()) << ", not "
           << shard;
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  return verifyShardOf(*this, getInput().getType(), getResult().getType(),
                       static_cast<int64_t>(getRanks()));
}

LogicalResult ShardOp::verify() {
  return verifyShardOf(*this, getInput().getType(), getResult().getType(),
                       static_cast<int64_t>(getRanks()));
}

LogicalResult AllGatherOp::verify() {
  return verifyShardOf(*this, getTarget().getType(), getShard().getType(),
                       static_cast<int64_t>(getRanks()));
}

LogicalResult UnshardOp::verify() {
  return verifyShardOf(*this, getResult().getType(), getShard().getType(),
                       static_cast<int64_t>(getRanks()));
}

#define GET_OP_CLASSES
#include "dialects/Train/TrainOps.cpp.inc"
