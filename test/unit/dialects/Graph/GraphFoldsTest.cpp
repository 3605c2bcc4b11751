// GraphFoldsTest.cpp - Folding graph.cast of constants, against APFloat.
//
// The folder reads and writes f32, f64 and bf16 constants through their
// stored bits (a rotary table cast in every layer of an 80-layer model is
// tens of millions of elements). Every element must come out as APFloat's
// round-to-nearest-even conversion gives it, bit for bit: ties, values
// with more precision than a float, overflow, subnormals, infinities and
// NaN.

#include "dialects/Graph/GraphDialect.h"
#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace mlir;

namespace {

class GraphFolds : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<strata::graph::GraphDialect>();
    module = ModuleOp::create(UnknownLoc::get(&context));
  }

  /// Folds graph.cast of `values` (stored as `from`) to `to`; the folded
  /// attribute, or null when the cast did not fold.
  DenseElementsAttr foldCast(ArrayRef<double> values, FloatType from,
                             FloatType to) {
    OpBuilder b(module->getBodyRegion());
    Location loc = b.getUnknownLoc();
    auto inType = RankedTensorType::get({int64_t(values.size())}, from);
    auto outType = RankedTensorType::get({int64_t(values.size())}, to);
    SmallVector<APFloat> stored;
    for (double v : values)
      stored.push_back(convert(v, from));
    auto constant = b.create<strata::graph::ConstantOp>(
        loc, DenseElementsAttr::get(inType, stored));
    auto cast = b.create<strata::graph::CastOp>(loc, outType, constant);
    SmallVector<OpFoldResult> results;
    if (failed(cast->fold(results)) || results.size() != 1)
      return {};
    return dyn_cast_or_null<DenseElementsAttr>(dyn_cast<Attribute>(results[0]));
  }

  /// `v` rounded to `type` by APFloat, to nearest, ties to even.
  static APFloat convert(double v, FloatType type) {
    APFloat f(v);
    bool losesInfo;
    f.convert(type.getFloatSemantics(), APFloat::rmNearestTiesToEven,
              &losesInfo);
    return f;
  }

  /// Checks each folded element's bits against APFloat's conversion of
  /// the stored input (itself converted from `values` by APFloat).
  void expectExact(ArrayRef<double> values, FloatType from, FloatType to) {
    DenseElementsAttr folded = foldCast(values, from, to);
    ASSERT_TRUE(folded) << "the cast did not fold";
    auto got = folded.getValues<APFloat>();
    for (size_t k = 0; k < values.size(); ++k) {
      APFloat want = convert(convert(values[k], from).convertToDouble(), to);
      EXPECT_EQ(got[k].bitcastToAPInt(), want.bitcastToAPInt())
          << "element " << k << " = " << values[k];
    }
  }

  /// Values at the edges of the float and bf16 formats, plus random ones.
  static std::vector<double> hardValues() {
    std::vector<double> v{0.0,
                          -0.0,
                          1.0,
                          -1.5,
                          FLT_MAX,
                          -FLT_MAX,
                          double(FLT_MAX) * 1.0000001,
                          1e300,
                          -1e300,
                          FLT_MIN,
                          FLT_TRUE_MIN,
                          double(FLT_TRUE_MIN) / 3,
                          1e-300,
                          std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::quiet_NaN(),
                          0.1,
                          1.0 / 3};
    // bf16 ties: 1 + k * 2^-8 lies halfway between bf16 neighbours for
    // odd k (both parities of the lower neighbour), and just beside them.
    for (int k = 1; k < 8; ++k) {
      double tie = 1.0 + k * std::ldexp(1.0, -8);
      v.push_back(tie);
      v.push_back(-tie);
      v.push_back(std::nextafter(tie, 2.0));
      v.push_back(std::nextafter(tie, 0.0));
      // Beside the tie by less than a float's ulp: a double that no float
      // holds, which must not round through a float twice.
      v.push_back(tie + std::ldexp(1.0, -40));
      v.push_back(tie - std::ldexp(1.0, -40));
    }
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> mantissa(-2.0, 2.0);
    std::uniform_int_distribution<int> exponent(-140, 130);
    for (int k = 0; k < 4000; ++k)
      v.push_back(std::ldexp(mantissa(rng), exponent(rng)));
    return v;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

} // namespace

TEST_F(GraphFolds, CastsRoundAsAPFloatDoes) {
  Builder b(&context);
  std::vector<double> values = hardValues();
  FloatType f64 = b.getF64Type(), f32 = b.getF32Type(), bf16 = b.getBF16Type(),
            f16 = b.getF16Type();
  for (auto [from, to] :
       {std::pair{f64, bf16}, std::pair{f64, f32}, std::pair{f32, bf16},
        std::pair{f32, f64}, std::pair{bf16, f32}, std::pair{bf16, f64},
        std::pair{f64, f16}, std::pair{f16, bf16}}) {
    SCOPED_TRACE(testing::Message()
                 << "cast of " << values.size() << " values, input width "
                 << from.getWidth() << " to " << to.getWidth());
    expectExact(values, from, to);
  }
}

TEST_F(GraphFolds, SplatCastsStaySplats) {
  Builder b(&context);
  OpBuilder ob(module->getBodyRegion());
  auto inType = RankedTensorType::get({1024, 1024}, b.getF32Type());
  auto outType = RankedTensorType::get({1024, 1024}, b.getBF16Type());
  auto constant = ob.create<strata::graph::ConstantOp>(
      ob.getUnknownLoc(), DenseElementsAttr::get(inType, APFloat(1.00390625f)));
  auto cast =
      ob.create<strata::graph::CastOp>(ob.getUnknownLoc(), outType, constant);
  SmallVector<OpFoldResult> results;
  ASSERT_TRUE(succeeded(cast->fold(results)));
  auto folded =
      dyn_cast_or_null<DenseElementsAttr>(dyn_cast<Attribute>(results[0]));
  ASSERT_TRUE(folded);
  EXPECT_TRUE(folded.isSplat());
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even, 1.
  EXPECT_EQ(folded.getSplatValue<APFloat>().convertToDouble(), 1.0);
}

TEST_F(GraphFolds, LargeCastsAreLeftToTheRuntime) {
  // Over 2^20 elements (not a splat) the cast stays an op.
  std::vector<double> values(size_t(1) << 21);
  for (size_t k = 0; k < values.size(); ++k)
    values[k] = double(k);
  Builder b(&context);
  EXPECT_FALSE(foldCast(values, b.getF32Type(), b.getBF16Type()));
  values.resize(size_t(1) << 20);
  EXPECT_TRUE(foldCast(values, b.getF32Type(), b.getBF16Type()));
}
