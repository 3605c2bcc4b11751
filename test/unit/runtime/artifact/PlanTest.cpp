// PlanTest.cpp - plan.bin round trip and refusal of damaged plans.

#include "runtime/artifact/Plan.h"
#include "runtime/artifact/KernelTable.h"
#include "runtime/artifact/StepOrder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <unistd.h>

using namespace strata;
using namespace strata::artifact;

namespace {

Plan samplePlan() {
  Plan p;
  p.producer = "test";
  p.sourceModel = "m.onnx";
  p.arenaBytes = 128;
  p.paramsBytes = 4096;
  p.paramsFileBytes = 4096;
  p.slots.push_back({"x", DType::F32, {2, 4}, Region::Arena, 0, 32});
  p.slots.push_back({"w", DType::F32, {4, 4}, Region::Params, 0, 64});
  p.slots.push_back(
      {"y", DType::F32, {2, 4}, Region::Arena, 64, 32, SlotClass::Workspace});
  p.inputs.push_back({"x", 0});
  p.outputs.push_back({"y", 2});
  p.params.push_back({"w", 1, ParamEntry::Trainable, 0, 64, 1234});
  p.predicted.push_back({Queue::Compute, 0, 1.5, 20.25});
  Step s;
  s.kernel = Kernel::MatMul;
  s.inputs = {0, 1};
  s.outputs = {2};
  s.ints = {0, -3};
  s.floats = {0.5};
  p.steps.push_back(s);
  return p;
}

std::string tempPath() {
  return ::testing::TempDir() + "/plan." + std::to_string(getpid());
}

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeAll(const std::string &path, const std::string &data) {
  std::ofstream(path, std::ios::binary) << data;
}

TEST(Plan, RoundTrips) {
  std::string path = tempPath(), error;
  ASSERT_TRUE(writePlan(path, samplePlan(), error)) << error;
  Plan p;
  ASSERT_TRUE(readPlan(path, p, error)) << error;
  EXPECT_EQ(p.producer, "test");
  ASSERT_EQ(p.slots.size(), 3u);
  EXPECT_EQ(p.slots[1].shape, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(p.params[0].crc, 1234u);
  EXPECT_EQ(p.steps[0].kernel, Kernel::MatMul);
  EXPECT_EQ(p.steps[0].ints, (std::vector<int64_t>{0, -3}));
  EXPECT_EQ(p.steps[0].floats, (std::vector<double>{0.5}));
  EXPECT_EQ(p.slots[2].cls, SlotClass::Workspace);
  ASSERT_EQ(p.predicted.size(), 1u);
  EXPECT_EQ(p.predicted[0].queue, Queue::Compute);
  EXPECT_EQ(p.predicted[0].step, 0u);
  EXPECT_EQ(p.predicted[0].startUs, 1.5);
  EXPECT_EQ(p.predicted[0].endUs, 20.25);
  std::remove(path.c_str());
}

TEST(Plan, RefusesOtherVersionsAndDamage) {
  std::string path = tempPath(), error;
  ASSERT_TRUE(writePlan(path, samplePlan(), error)) << error;
  std::string good = readAll(path);
  Plan p;

  std::string truncated = good.substr(0, good.size() - 3);
  writeAll(path, truncated);
  EXPECT_FALSE(readPlan(path, p, error));
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;

  std::string flipped = good;
  flipped[flipped.size() - 1] ^= 1;
  writeAll(path, flipped);
  EXPECT_FALSE(readPlan(path, p, error));
  EXPECT_NE(error.find("payload checksum"), std::string::npos) << error;

  writeAll(path, "not a plan at all, just text");
  EXPECT_FALSE(readPlan(path, p, error));
  EXPECT_NE(error.find("bad magic"), std::string::npos) << error;
  std::remove(path.c_str());
}

TEST(Plan, ValidationCatchesInconsistentPlans) {
  std::string error;
  Plan p = samplePlan();
  p.steps[0].inputs[1] = 7;
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("refers to slot 7"), std::string::npos) << error;
  p = samplePlan();
  p.slots[2].offset = 120; // 120 + 32 > arena of 128.
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("outside its region"), std::string::npos) << error;
  p = samplePlan();
  p.slots[0].bytes = 31;
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("wrong byte size"), std::string::npos) << error;
  p = samplePlan();
  p.steps[0].outputs[0] = 1; // Writing into the parameter region.
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("writes outside the arena"), std::string::npos);
  p = samplePlan();
  p.slots[0].cls = static_cast<SlotClass>(kNumSlotClasses);
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("unknown class"), std::string::npos) << error;
  // A predicted span names a step and a queue of the plan, with sane times.
  for (PredictedSpan bad : {PredictedSpan{Queue::Compute, 1, 0, 1},
                            PredictedSpan{static_cast<Queue>(9), 0, 0, 1},
                            PredictedSpan{Queue::Compute, 0, 5, 1},
                            PredictedSpan{Queue::Compute, 0, NAN, 1}}) {
    p = samplePlan();
    p.predicted = {bad};
    EXPECT_FALSE(validatePlan(p, error));
    EXPECT_NE(error.find("predicted span 0"), std::string::npos) << error;
  }
}

// x (arena) -> exp -> a; fetch h (host) into [64, 96); a * h -> y.
Plan fetchPlan(int64_t issueAfter, uint64_t fetchOffset) {
  Plan p;
  p.arenaBytes = 256;
  p.hostBytes = 4096;
  p.paramsFileBytes = 4096;
  p.slots.push_back({"x", DType::F32, {8}, Region::Arena, 0, 32});
  p.slots.push_back({"a", DType::F32, {8}, Region::Arena, 64, 32});
  p.slots.push_back({"h", DType::F32, {8}, Region::Host, 0, 32});
  p.slots.push_back({"hf", DType::F32, {8}, Region::Arena, fetchOffset, 32});
  p.slots.push_back({"y", DType::F32, {8}, Region::Arena, 192, 32});
  p.inputs.push_back({"x", 0});
  p.outputs.push_back({"y", 4});
  p.params.push_back({"h", 2, 0, 0, 32, 0});
  Step exp, fetch, mul;
  exp.kernel = Kernel::Exp;
  exp.inputs = {0};
  exp.outputs = {1};
  fetch.kernel = Kernel::Copy;
  fetch.inputs = {2};
  fetch.outputs = {3};
  fetch.issueAfter = issueAfter;
  mul.kernel = Kernel::Mul;
  mul.inputs = {1, 3};
  mul.outputs = {4};
  p.steps = {exp, fetch, mul};
  scheduleSteps(p);
  return p;
}

TEST(Plan, FetchesScheduledAheadMustNotOvertakeConflicts) {
  std::string error;
  // Its own bytes: it may start with the step, and the order round-trips.
  Plan p = fetchPlan(-1, 128);
  ASSERT_TRUE(validatePlan(p, error)) << error;
  std::string path = tempPath();
  ASSERT_TRUE(writePlan(path, p, error)) << error;
  Plan q;
  ASSERT_TRUE(readPlan(path, q, error)) << error;
  EXPECT_EQ(q.steps[1].issueAfter, -1);
  EXPECT_EQ(q.steps[0].issueAfter, kInProgramOrder);
  std::remove(path.c_str());
  // Into bytes step 0 writes: it must wait for step 0.
  EXPECT_FALSE(validatePlan(fetchPlan(-1, 64), error));
  EXPECT_NE(error.find("scheduled before step 0"), std::string::npos) << error;
  EXPECT_TRUE(validatePlan(fetchPlan(0, 64), error)) << error;
  // Not after itself; only fetches.
  EXPECT_FALSE(validatePlan(fetchPlan(1, 128), error));
  p = fetchPlan(kInProgramOrder, 128);
  p.steps[2].issueAfter = 0;
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("not a fetch"), std::string::npos) << error;
}

// A sharded parameter's gather (unshard) of s (the parameter region) into
// [64, 96): step 0 updates s (update_sgd with gradient g), step 1 writes
// [0, 32), step 2 gathers, step 3 reads it.
Plan unshardPlan(int64_t issueAfter) {
  Plan p;
  p.arenaBytes = 256;
  p.paramsBytes = 64;
  p.paramsFileBytes = 4096;
  p.slots.push_back({"s", DType::F32, {4}, Region::Params, 0, 16});
  p.slots.push_back({"g", DType::F32, {4}, Region::Arena, 128, 16});
  p.slots.push_back({"x", DType::F32, {8}, Region::Arena, 0, 32});
  p.slots.push_back({"w", DType::F32, {8}, Region::Arena, 64, 32});
  p.slots.push_back({"y", DType::F32, {8}, Region::Arena, 192, 32});
  p.inputs.push_back({"g", 1});
  p.inputs.push_back({"x", 2});
  p.outputs.push_back({"y", 4});
  p.params.push_back({"s", 0, 0, 0, 16, 0});
  Step update, exp, gather, mul;
  update.kernel = Kernel::UpdateSgd;
  update.inputs = {0, 1};
  update.ints = {1};
  update.floats = {0.1, 0.0};
  exp.kernel = Kernel::Exp;
  exp.inputs = {2};
  exp.outputs = {2};
  gather.kernel = Kernel::Unshard;
  gather.inputs = {0};
  gather.outputs = {3};
  gather.ints = {2};
  gather.issueAfter = issueAfter;
  mul.kernel = Kernel::Mul;
  mul.inputs = {2, 3};
  mul.outputs = {4};
  p.steps = {update, exp, gather, mul};
  scheduleSteps(p);
  return p;
}

TEST(Plan, UnshardsScheduledAheadMustNotOvertakeTheirShardsUpdate) {
  std::string error;
  // After the update of its shard: ahead of step 1, whose bytes it does
  // not touch.
  EXPECT_TRUE(validatePlan(unshardPlan(0), error)) << error;
  EXPECT_TRUE(validatePlan(unshardPlan(kInProgramOrder), error)) << error;
  // Before it: it would gather the shard's old values.
  EXPECT_FALSE(validatePlan(unshardPlan(-1), error));
  EXPECT_NE(error.find("(fetch of 's') is scheduled before step 0"),
            std::string::npos)
      << error;
}

TEST(Kernel, NamesRoundTrip) {
  for (uint16_t k = 1; k < static_cast<uint16_t>(Kernel::NumKernels); ++k) {
    Kernel kernel;
    ASSERT_TRUE(kernelByName(kernelName(static_cast<Kernel>(k)), kernel));
    EXPECT_EQ(static_cast<uint16_t>(kernel), k);
  }
}

// The compiler tells an optimizer update by its name (exec.kernel's
// isUpdate): the update_* kernels are exactly those that write their
// parameter and states in place.
TEST(Kernel, UpdatesAreTheUpdateNamedKernels) {
  for (uint16_t k = 1; k < static_cast<uint16_t>(Kernel::NumKernels); ++k) {
    std::string name = kernelName(static_cast<Kernel>(k));
    const KernelInfo *info = kernelInfoByName(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(name.rfind("update_", 0) == 0,
              info->inPlace == InPlace::ParamAndStates)
        << name;
  }
}

} // namespace
