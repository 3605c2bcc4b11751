// KernelContractTest.cpp - The plan validator refuses steps whose operands
// do not fit their kernel, so that no checksummed but inconsistent plan can
// make a kernel read or write out of bounds.

#include "runtime/artifact/KernelTable.h"
#include "runtime/artifact/Plan.h"

#include <gtest/gtest.h>

using namespace strata;
using namespace strata::artifact;

namespace {

/// A plan with one step of `kernel` over arena slots of the given shapes
/// (inputs first, then outputs), all float32 unless `dtypes` says otherwise.
Plan onePlan(Kernel kernel, const std::vector<std::vector<int64_t>> &ins,
             const std::vector<std::vector<int64_t>> &outs,
             std::vector<int64_t> ints = {}, std::vector<double> floats = {},
             std::vector<DType> dtypes = {}) {
  Plan p;
  uint64_t offset = 0;
  Step s;
  s.kernel = kernel;
  s.ints = std::move(ints);
  s.floats = std::move(floats);
  size_t k = 0;
  auto add = [&](const std::vector<int64_t> &shape) {
    Slot slot;
    slot.name = "s" + std::to_string(k);
    slot.dtype = k < dtypes.size() ? dtypes[k] : DType::F32;
    ++k;
    slot.shape = shape;
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    slot.bytes = n * dtypeSize(slot.dtype);
    slot.offset = offset;
    offset += alignUp(slot.bytes, kArenaAlignment);
    p.slots.push_back(slot);
    return static_cast<uint32_t>(p.slots.size() - 1);
  };
  for (const auto &shape : ins)
    s.inputs.push_back(add(shape));
  for (const auto &shape : outs)
    s.outputs.push_back(add(shape));
  p.arenaBytes = offset;
  p.steps.push_back(s);
  return p;
}

std::string validate(const Plan &p) {
  std::string error;
  return validatePlan(p, error) ? "" : error;
}

TEST(KernelContract, AcceptsWellFormedSteps) {
  EXPECT_EQ(validate(onePlan(Kernel::MatMul, {{2, 3}, {3, 5}}, {{2, 5}})), "");
  EXPECT_EQ(validate(onePlan(Kernel::MatMul, {{2, 3}, {3, 5}, {}}, {{2, 5}}, {},
                             {}, {DType::F32, DType::F32, DType::I64})),
            "");
  EXPECT_EQ(validate(onePlan(Kernel::CompactRows, {{4}}, {{4}, {}}, {}, {},
                             {DType::Bool, DType::I64, DType::I64})),
            "");
  using D = DType;
  EXPECT_EQ(validate(onePlan(Kernel::GroupRows, {{6}, {6}}, {{6}, {3}, {}}, {},
                             {}, {D::Bool, D::Bool, D::I64, D::I64, D::I64})),
            "");
  EXPECT_EQ(validate(onePlan(Kernel::GroupedMatMul,
                             {{6, 3}, {3}, {5, 3}, {5, 3}}, {{6, 5}}, {1}, {},
                             {D::F32, D::I64, D::F32, D::F32, D::F32})),
            "");
  EXPECT_EQ(
      validate(onePlan(Kernel::SegmentMatMul, {{6, 3}, {6, 5}, {3}}, {{3, 5}},
                       {1}, {}, {D::F32, D::F32, D::I64, D::F32})),
      "");
  EXPECT_EQ(validate(onePlan(Kernel::MatMul, {{4, 2, 3}, {5, 3}}, {{4, 2, 5}},
                             {0, 1})),
            "");
  EXPECT_EQ(validate(onePlan(Kernel::Add, {{2, 3}, {3}}, {{2, 3}})), "");
  EXPECT_EQ(validate(onePlan(Kernel::Slice, {{4, 6}}, {{2, 3}}, {1, 5, 2, -2})),
            "");
  EXPECT_EQ(validate(onePlan(Kernel::ReduceSum, {{2, 3, 4}}, {{2, 4}}, {1, 0})),
            "");
  EXPECT_EQ(validate(onePlan(Kernel::Gather, {{10, 4}, {2, 3}}, {{2, 3, 4}},
                             {0}, {}, {DType::F32, DType::I64, DType::F32})),
            "");
  EXPECT_EQ(validate(onePlan(Kernel::Concat, {{2, 3}, {2, 5}}, {{2, 8}}, {1})),
            "");
  // Mixed precision: an update writing the bf16 copy of its fp32 weights
  // (after the scale, or without one), and the loss of bf16 logits in fp32.
  const std::vector<double> adamw = {1e-3, 0.9, 0.999, 1e-8, 0};
  EXPECT_EQ(
      validate(onePlan(Kernel::UpdateAdamW, {{4}, {4}, {4}, {4}, {}, {2, 2}},
                       {}, {1, 1}, adamw,
                       {DType::F32, DType::F32, DType::F32, DType::F32,
                        DType::F32, DType::BF16})),
      "");
  EXPECT_EQ(validate(onePlan(Kernel::UpdateSgd, {{4}, {4}, {4}}, {}, {1, 1},
                             {0.1, 0}, {DType::F32, DType::F32, DType::F16})),
            "");
  EXPECT_EQ(validate(onePlan(Kernel::CrossEntropy, {{4, 10}, {4}}, {{}}, {}, {},
                             {DType::BF16, DType::I64, DType::F32})),
            "");
  EXPECT_EQ(validate(onePlan(
                Kernel::CrossEntropyGrad, {{4, 10}, {4}, {}}, {{4, 10}}, {}, {},
                {DType::BF16, DType::I64, DType::F32, DType::BF16})),
            "");
}

TEST(KernelContract, UpdateOperandsPlaceTheScaleAndTheCopy) {
  UpdateOperands both = updateOperands(Kernel::UpdateAdamW, 6, {1, 1});
  EXPECT_EQ(both.before, 4u);
  EXPECT_EQ(both.scale, 4);
  EXPECT_EQ(both.low, 5);
  UpdateOperands copy = updateOperands(Kernel::UpdateMomentum, 4, {1, 1});
  EXPECT_EQ(copy.scale, -1);
  EXPECT_EQ(copy.low, 3);
  UpdateOperands scale = updateOperands(Kernel::UpdateSgd, 3, {1});
  EXPECT_EQ(scale.scale, 2);
  EXPECT_EQ(scale.low, -1);
  // The copy is written in place, with the weights and the states.
  EXPECT_EQ(writtenInputs(Kernel::UpdateAdamW, 6, {1, 1}),
            (std::vector<unsigned>{0, 2, 3, 5}));
  EXPECT_EQ(writtenInputs(Kernel::UpdateAdamW, 5, {1}),
            (std::vector<unsigned>{0, 2, 3}));
}

TEST(KernelContract, SpeculativeUpdatesKeepEveryTensorTheyWrite) {
  // (w, g, m, v, [scale], low, keeps of w, m, v, low).
  UpdateOperands spec = updateOperands(Kernel::UpdateAdamW, 9, {1, 1, 1});
  EXPECT_EQ(spec.speculation, Speculation::Speculate);
  EXPECT_EQ(spec.scale, -1);
  EXPECT_EQ(spec.low, 4);
  EXPECT_EQ(spec.keeps, 5);
  UpdateOperands redo = updateOperands(Kernel::UpdateAdamW, 10, {1, 1, 2});
  EXPECT_EQ(redo.speculation, Speculation::Redo);
  EXPECT_EQ(redo.scale, 4);
  EXPECT_EQ(redo.low, 5);
  EXPECT_EQ(redo.keeps, 6);
  // The speculative update writes its keeps without reading them; the
  // redo reads them and writes what the update writes.
  EXPECT_EQ(writtenInputs(Kernel::UpdateAdamW, 9, {1, 1, 1}),
            (std::vector<unsigned>{0, 2, 3, 4, 5, 6, 7, 8}));
  std::vector<InputUse> uses = inputUses(Kernel::UpdateAdamW, 9, {1, 1, 1});
  EXPECT_TRUE(uses[0].read && uses[0].written);
  EXPECT_TRUE(!uses[5].read && uses[5].written);
  EXPECT_EQ(writtenInputs(Kernel::UpdateAdamW, 10, {1, 1, 2}),
            (std::vector<unsigned>{0, 2, 3, 5}));
  // Too few inputs for the keeps: not a speculative step at all.
  EXPECT_EQ(updateOperands(Kernel::UpdateSgd, 2, {1, 0, 1}).speculation,
            Speculation::None);
  EXPECT_EQ(updateOperands(Kernel::UpdateAdamW, 6, {1, 0, 1}).speculation,
            Speculation::None);

  auto sgd = [](std::vector<std::vector<int64_t>> ins,
                std::vector<int64_t> ints, Region region) {
    Plan p = onePlan(Kernel::UpdateSgd, ins, {}, ints, {0.1, 0});
    for (Slot &slot : p.slots)
      slot.region = region;
    if (region == Region::Host) {
      p.hostBytes = p.arenaBytes;
      p.steps[0].queue = Queue::Cpu;
    }
    return p;
  };
  // (w, g, keep of w) on the host, and its redo (w, g, scale, keep).
  EXPECT_EQ(validate(sgd({{4}, {4}, {4}}, {1, 0, 1}, Region::Host)), "");
  EXPECT_EQ(validate(sgd({{4}, {4}, {}, {4}}, {1, 0, 2}, Region::Host)), "");
  // Only the CPU speculates; keeps match what they keep; the speculative
  // update has no scale and the redo one; an unknown mode is refused.
  EXPECT_NE(validate(sgd({{4}, {4}, {4}}, {1, 0, 1}, Region::Arena))
                .find("speculates but is not a CPU update"),
            std::string::npos);
  EXPECT_NE(validate(sgd({{4}, {4}, {5}}, {1, 0, 1}, Region::Host)), "");
  EXPECT_NE(validate(sgd({{4}, {4}, {}, {4}}, {1, 0, 1}, Region::Host))
                .find("speculates with a scale"),
            std::string::npos);
  EXPECT_NE(validate(sgd({{4}, {4}, {4}}, {1, 0, 2}, Region::Host))
                .find("redoes without a scale"),
            std::string::npos);
  EXPECT_NE(validate(sgd({{4}, {4}, {4}}, {1, 0, 7}, Region::Host))
                .find("speculation mode 7"),
            std::string::npos);
  EXPECT_NE(
      validate(sgd({{4}, {4}}, {1, 0, 1}, Region::Host)).find("without a keep"),
      std::string::npos);
}

TEST(KernelContract, RefusesWhatWouldReadOrWriteOutOfBounds) {
  struct Case {
    const char *what;
    Plan plan;
    const char *expected;
  };
  std::vector<Case> cases = {
      {"matmul inner mismatch",
       onePlan(Kernel::MatMul, {{2, 3}, {4, 5}}, {{2, 5}}), "inner dimensions"},
      {"matmul result too small",
       onePlan(Kernel::MatMul, {{2, 3}, {3, 5}}, {{2, 4}}), "elements"},
      {"matmul batches",
       onePlan(Kernel::MatMul, {{3, 2, 3}, {2, 3, 5}}, {{3, 2, 5}}),
       "broadcast"},
      {"matmul rows not a scalar",
       onePlan(Kernel::MatMul, {{2, 3}, {3, 5}, {2}}, {{2, 5}}, {}, {},
               {DType::F32, DType::F32, DType::I64}),
       "rows must be an int64 scalar"},
      {"matmul rows of a batch",
       onePlan(Kernel::MatMul, {{4, 2, 3}, {3, 5}, {}}, {{4, 2, 5}}, {}, {},
               {DType::F32, DType::F32, DType::I64}),
       "both operands must be matrices"},
      {"matmul rows both transposed",
       onePlan(Kernel::MatMul, {{3, 2}, {5, 3}, {}}, {{2, 5}}, {1, 1}, {},
               {DType::F32, DType::F32, DType::I64}),
       "b must not be transposed"},
      {"compact_rows of floats",
       onePlan(Kernel::CompactRows, {{4}}, {{4}, {}}, {}, {},
               {DType::F32, DType::I64, DType::I64}),
       "needs a bool vector"},
      {"compact_rows count shape",
       onePlan(Kernel::CompactRows, {{4}}, {{4}, {1}}, {}, {},
               {DType::Bool, DType::I64, DType::I64}),
       "count must be an int64 scalar"},
      {"group_rows of masks of two lengths",
       onePlan(Kernel::GroupRows, {{6}, {5}}, {{6}, {3}, {}}, {}, {},
               {DType::Bool, DType::Bool, DType::I64, DType::I64, DType::I64}),
       "bool vectors of one length"},
      {"group_rows offsets",
       onePlan(Kernel::GroupRows, {{6}, {6}}, {{6}, {2}, {}}, {}, {},
               {DType::Bool, DType::Bool, DType::I64, DType::I64, DType::I64}),
       "one entry per mask and one more"},
      {"grouped_matmul offsets",
       onePlan(Kernel::GroupedMatMul, {{6, 3}, {2}, {3, 5}, {3, 5}}, {{6, 5}},
               {0}, {}, {DType::F32, DType::I64, DType::F32, DType::F32}),
       "one entry per weight"},
      {"grouped_matmul weights of two shapes",
       onePlan(Kernel::GroupedMatMul, {{6, 3}, {3}, {3, 5}, {3, 4}}, {{6, 5}},
               {0}, {}, {DType::F32, DType::I64, DType::F32, DType::F32}),
       "one matrix shape"},
      {"grouped_matmul inner dimension",
       onePlan(Kernel::GroupedMatMul, {{6, 3}, {2}, {4, 5}}, {{6, 5}}, {0}, {},
               {DType::F32, DType::I64, DType::F32, DType::F32}),
       "columns"},
      {"grouped_matmul result",
       onePlan(Kernel::GroupedMatMul, {{6, 3}, {2}, {3, 5}}, {{5, 5}}, {0}, {},
               {DType::F32, DType::I64, DType::F32, DType::F32}),
       "result must be"},
      {"grouped_matmul attributes",
       onePlan(Kernel::GroupedMatMul, {{6, 3}, {2}, {3, 5}}, {{6, 5}}, {}, {},
               {DType::F32, DType::I64, DType::F32, DType::F32}),
       "attributes"},
      {"segment_matmul past the groups",
       onePlan(Kernel::SegmentMatMul, {{6, 3}, {6, 5}, {3}}, {{3, 5}}, {2}, {},
               {DType::F32, DType::F32, DType::I64, DType::F32}),
       "not one of the offsets' groups"},
      {"segment_matmul rows",
       onePlan(Kernel::SegmentMatMul, {{6, 3}, {5, 5}, {3}}, {{3, 5}}, {0}, {},
               {DType::F32, DType::F32, DType::I64, DType::F32}),
       "same rows"},
      {"add shapes", onePlan(Kernel::Add, {{2, 3}, {4}}, {{2, 3}}),
       "broadcast"},
      {"too few operands", onePlan(Kernel::Add, {{2, 3}}, {{2, 3}}), "inputs"},
      {"too many operands", onePlan(Kernel::Neg, {{2}, {2}}, {{2}}), "inputs"},
      {"slice past the end",
       onePlan(Kernel::Slice, {{4, 6}}, {{2, 3}}, {3, 0, 1, 2}), "window"},
      {"slice negative stride",
       onePlan(Kernel::Slice, {{4, 6}}, {{2, 3}}, {0, 1, 1, -1}), "window"},
      {"slice attributes", onePlan(Kernel::Slice, {{4, 6}}, {{2, 3}}, {0}),
       "offsets and strides"},
      {"reduce axis", onePlan(Kernel::ReduceSum, {{2, 3}}, {{2}}, {5, 0}),
       "axis"},
      {"reduce result", onePlan(Kernel::ReduceSum, {{2, 3}}, {{6}}, {1, 0}),
       "elements"},
      {"softmax attributes", onePlan(Kernel::Softmax, {{2, 3}}, {{2, 3}}),
       "attributes"},
      {"transpose permutation",
       onePlan(Kernel::Transpose, {{2, 3}}, {{3, 2}}, {0, 0}), "permutation"},
      {"gather result",
       onePlan(Kernel::Gather, {{10, 4}, {2, 3}}, {{2, 4}}, {0}, {},
               {DType::F32, DType::I64, DType::F32}),
       "elements"},
      {"gather index type",
       onePlan(Kernel::Gather, {{10, 4}, {2}}, {{2, 4}}, {0}),
       "int32 or int64"},
      {"concat sizes", onePlan(Kernel::Concat, {{2, 3}, {2, 5}}, {{2, 9}}, {1}),
       "add up"},
      {"copy sizes", onePlan(Kernel::Copy, {{2}}, {{3}}), "element count"},
      {"cross-entropy labels",
       onePlan(Kernel::CrossEntropy, {{4, 10}, {3}}, {{}}, {}, {},
               {DType::F32, DType::I64, DType::F32}),
       "elements"},
      {"layer norm axis",
       onePlan(Kernel::LayerNorm, {{2, 4}, {4}}, {{2, 4}}, {3, 0}, {1e-5}),
       "axis"},
      {"adamw states",
       onePlan(Kernel::UpdateAdamW, {{4}, {4}, {4}, {3}}, {}, {},
               {1e-3, 0.9, 0.999, 1e-8, 0}),
       "element count"},
      {"adamw hyperparameters",
       onePlan(Kernel::UpdateAdamW, {{4}, {4}, {4}, {4}}, {}, {}, {1e-3}),
       "attributes"},
      {"copy of another type",
       onePlan(Kernel::UpdateSgd, {{4}, {4}, {4}}, {}, {1, 1}, {0.1, 0}),
       "bf16 or f16 copy"},
      {"copy of half weights",
       onePlan(Kernel::UpdateSgd, {{4}, {4}, {4}}, {}, {1, 1}, {0.1, 0},
               {DType::F16, DType::F16, DType::F16}),
       "bf16 or f16 copy"},
      {"copy size",
       onePlan(Kernel::UpdateSgd, {{4}, {4}, {3}}, {}, {1, 1}, {0.1, 0},
               {DType::F32, DType::F32, DType::BF16}),
       "element count"},
      {"copy named, absent",
       onePlan(Kernel::UpdateSgd, {{4}, {4}}, {}, {1, 1}, {0.1, 0}),
       "does not have"},
      {"cross-entropy gradient type",
       onePlan(Kernel::CrossEntropyGrad, {{4, 10}, {4}, {}}, {{4, 10}}, {}, {},
               {DType::BF16, DType::I64, DType::F32, DType::F32}),
       "mixes"},
      {"mixed types",
       onePlan(Kernel::Mul, {{2}, {2}}, {{2}}, {}, {},
               {DType::F32, DType::F64, DType::F32}),
       "mixes"},
  };
  for (Case &c : cases) {
    std::string error = validate(c.plan);
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << c.what << ": " << (error.empty() ? "accepted" : error);
  }
}

TEST(KernelContract, RefusesShapesWhoseSizeOverflows) {
  Plan p = onePlan(Kernel::Neg, {{2}}, {{2}});
  p.slots[0].shape = {int64_t(1) << 62, 4};
  p.slots[0].bytes = 0; // What a wrapped product would give.
  std::string error = validate(p);
  EXPECT_NE(error.find("more bytes than"), std::string::npos) << error;
}

} // namespace

namespace {

TEST(KernelContract, RefusesRegionsThatWouldWrapWhenPadded) {
  Plan p = onePlan(Kernel::Neg, {{2}}, {{2}});
  p.hostBytes = ~uint64_t(0) - 100; // pagePadded() would wrap to 0.
  std::string error = validate(p);
  EXPECT_NE(error.find("host region"), std::string::npos) << error;
}

} // namespace
