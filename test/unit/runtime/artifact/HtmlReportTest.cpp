// HtmlReportTest.cpp - Memory over the step and the page's contents, on a
// plan small enough to work out by hand.

#include "runtime/artifact/HtmlReport.h"
#include "runtime/artifact/StepOrder.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace strata;
using namespace strata::artifact;

namespace {

// w (SSD parameter) fetched into wf; y = x @ wf; y written back into the
// host state h; z = exp(yv) where yv is a view of y (no step writes it);
// g = -x reuses wf's bytes. x is the input, z the output.
//   0: copy   w   -> wf [0, 64)     parameter
//   1: matmul x,wf -> y [128, 192)  activation
//   2: assign h <- y
//   3: exp    yv  -> z  [192, 256)  activation, output
//   4: neg    x   -> g  [0, 64)     gradient
Plan handPlan() {
  Plan p;
  p.mode = "train";
  p.arenaBytes = 256;
  p.hostBytes = 64;
  p.ssdBytes = 4096;
  p.paramsFileBytes = 8192;
  p.slots.push_back(
      {"w", DType::F32, {4, 4}, Region::Ssd, 0, 64, SlotClass::Parameter});
  p.slots.push_back(
      {"wf", DType::F32, {4, 4}, Region::Arena, 0, 64, SlotClass::Parameter});
  p.slots.push_back(
      {"x", DType::F32, {4, 4}, Region::Arena, 64, 64, SlotClass::Input});
  p.slots.push_back({"y", DType::F32, {4, 4}, Region::Arena, 128, 64});
  p.slots.push_back({"yv", DType::F32, {16}, Region::Arena, 128, 64});
  p.slots.push_back({"h",
                     DType::F32,
                     {4, 4},
                     Region::Host,
                     0,
                     64,
                     SlotClass::OptimizerState});
  p.slots.push_back(
      {"<script>z</script>", DType::F32, {4, 4}, Region::Arena, 192, 64});
  p.slots.push_back(
      {"g", DType::F32, {4, 4}, Region::Arena, 0, 64, SlotClass::Gradient});
  p.inputs.push_back({"x", 2});
  p.outputs.push_back({"z", 6});
  p.params.push_back({"w", 0, ParamEntry::Trainable, 0, 64, 0});
  p.params.push_back({"h", 5, ParamEntry::State, 4096, 64, 0});
  auto step = [&](Kernel k, std::vector<uint32_t> in,
                  std::vector<uint32_t> out) {
    Step s;
    s.kernel = k;
    s.inputs = std::move(in);
    s.outputs = std::move(out);
    p.steps.push_back(s);
  };
  step(Kernel::Copy, {0}, {1});
  step(Kernel::MatMul, {2, 1}, {3});
  step(Kernel::Assign, {5, 3}, {});
  step(Kernel::Exp, {4}, {6});
  step(Kernel::Neg, {2}, {7});
  scheduleSteps(p);
  return p;
}

uint64_t live(const MemoryOverStep &m, Tier tier, SlotClass cls, size_t p) {
  return m.live[static_cast<int>(tier)][static_cast<int>(cls)][p];
}

TEST(HtmlReport, MemoryOverTheStepFollowsWritesAndLastReads) {
  Plan p = handPlan();
  std::string error;
  ASSERT_TRUE(validatePlan(p, error)) << error;
  MemoryOverStep m = memoryOverStep(p);
  ASSERT_EQ(m.positions, 5u);
  // Device: wf at 0..1; x throughout (read before any write); y from its
  // write (1) to the read through its view (3); z from 3 to the end; g at 4.
  const uint64_t expected[5] = {128, 192, 128, 192, 192};
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(m.total(Tier::Device, i), expected[i]) << "position " << i;
  EXPECT_EQ(live(m, Tier::Device, SlotClass::Parameter, 1), 64u);
  EXPECT_EQ(live(m, Tier::Device, SlotClass::Parameter, 2), 0u);
  EXPECT_EQ(live(m, Tier::Device, SlotClass::Input, 4), 64u);
  EXPECT_EQ(live(m, Tier::Device, SlotClass::Activation, 3), 128u);
  EXPECT_EQ(live(m, Tier::Device, SlotClass::Gradient, 3), 0u);
  EXPECT_EQ(live(m, Tier::Device, SlotClass::Gradient, 4), 64u);
  EXPECT_EQ(m.peak(Tier::Device), 192u);
  // Stored tensors are there throughout; on the SSD in whole pages.
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(live(m, Tier::Host, SlotClass::OptimizerState, i), 64u);
    EXPECT_EQ(live(m, Tier::Ssd, SlotClass::Parameter, i), 4096u);
  }
  EXPECT_EQ(m.capacity[0], 256u);
  EXPECT_EQ(m.capacity[1], 64u);
  EXPECT_EQ(m.capacity[2], 4096u);
}

TEST(HtmlReport, ThePageHasItsFiguresAndEscapesNames) {
  Plan p = handPlan();
  p.predicted.push_back({Queue::SsdRead, 0, 0, 10});
  p.predicted.push_back({Queue::Compute, 1, 10, 30});
  std::vector<TraceEvent> trace = {
      {"run", "run", 0, 100, 200, -1},
      {"wf", "ssd-read", 3, 100, 120, 0},
      {"y", "matmul", 1, 120, 150, 1},
      {"h", "d2h", 2, 150, 160, 2},
      // Outside the last run: not drawn.
      {"y", "matmul", 1, 10, 20, 1},
  };
  std::vector<LogRow> log = {{0, 2.5, 0.01}, {1, NAN, 0.01}, {2, 2.0, 0.01}};
  ReportInputs in;
  in.artifactPath = "a&b.strata";
  in.trace = &trace;
  in.tracePath = "t.json";
  in.log = &log;
  in.logPath = "l.jsonl";
  std::string html = htmlReport(p, in);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("a&amp;b.strata"), std::string::npos);
  EXPECT_NE(html.find("id=\"memory-device\""), std::string::npos);
  EXPECT_NE(html.find("data-spans=\"2\" data-end-us=\"30.000\""),
            std::string::npos);
  EXPECT_NE(html.find("data-events=\"3\" data-steps-covered=\"3\" "
                      "data-run-us=\"100.000\""),
            std::string::npos);
  EXPECT_NE(html.find("data-points=\"2\" data-diverged=\"1\""),
            std::string::npos);
  // Nothing in the plan has a name that could end the page's markup.
  EXPECT_EQ(html.find("</script>"), std::string::npos);
}

} // namespace
