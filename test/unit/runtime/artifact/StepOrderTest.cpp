// StepOrderTest.cpp - Queues and waits: the derivation and the race check.

#include "runtime/artifact/StepOrder.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

using namespace strata;
using namespace strata::artifact;

namespace {

// Weights w (SSD) fetched into the arena, then x @ w; the gradient-like
// result written back to the host; then the arena bytes of the fetch
// reused by a kernel.
//   0: copy   w(ssd)  -> wf [0, 4096)        ssd-read
//   1: matmul x, wf   -> y  [4096, 4160)     compute
//   2: assign h(host) <- y                   d2h
//   3: exp    x       -> z  [4096, 4160)     compute (overwrites y: WAR)
Plan ssdPlan() {
  Plan p;
  p.arenaBytes = 8192;
  p.hostBytes = 4096;
  p.ssdBytes = 4096;
  p.paramsFileBytes = 8192;
  p.slots.push_back({"w", DType::F32, {4, 4}, Region::Ssd, 0, 64});
  p.slots.push_back({"wf", DType::F32, {4, 4}, Region::Arena, 0, 64});
  p.slots.push_back({"x", DType::F32, {4, 4}, Region::Arena, 6144, 64});
  p.slots.push_back({"y", DType::F32, {4, 4}, Region::Arena, 4096, 64});
  p.slots.push_back({"h", DType::F32, {4, 4}, Region::Host, 0, 64});
  p.slots.push_back({"z", DType::F32, {4, 4}, Region::Arena, 4096, 64});
  p.inputs.push_back({"x", 2});
  p.outputs.push_back({"z", 5});
  p.params.push_back({"w", 0, ParamEntry::Trainable, 0, 64, 0});
  p.params.push_back({"h", 4, ParamEntry::State, 4096, 64, 0});
  Step fetch, mm, back, ex;
  fetch.kernel = Kernel::Copy;
  fetch.inputs = {0};
  fetch.outputs = {1};
  mm.kernel = Kernel::MatMul;
  mm.inputs = {2, 1};
  mm.outputs = {3};
  back.kernel = Kernel::Assign;
  back.inputs = {4, 3};
  ex.kernel = Kernel::Exp;
  ex.inputs = {2};
  ex.outputs = {5};
  p.steps = {fetch, mm, back, ex};
  scheduleSteps(p);
  return p;
}

TEST(StepOrder, TheCompilerRuleGivesEachStepItsQueueAndWaits) {
  Plan p = ssdPlan();
  EXPECT_EQ(p.steps[0].queue, Queue::SsdRead);
  EXPECT_EQ(p.steps[1].queue, Queue::Compute);
  EXPECT_EQ(p.steps[2].queue, Queue::DeviceToHost);
  EXPECT_EQ(p.steps[3].queue, Queue::Compute);
  // matmul reads the fetch; the write-back reads the matmul's result; exp
  // overwrites what the write-back reads.
  EXPECT_EQ(p.steps[0].waits, std::vector<uint32_t>{});
  EXPECT_EQ(p.steps[1].waits, std::vector<uint32_t>{0});
  EXPECT_EQ(p.steps[2].waits, std::vector<uint32_t>{1});
  EXPECT_EQ(p.steps[3].waits, std::vector<uint32_t>{2});
  std::string error;
  EXPECT_TRUE(validatePlan(p, error)) << error;
}

TEST(StepOrder, APlanWithAMissingWaitIsRefusedNamingBothSteps) {
  std::string error;
  // Read after write across queues: the matmul would read the fetch's
  // bytes while the SSD read may still be writing them.
  Plan p = ssdPlan();
  p.steps[1].waits.clear();
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("step 0 (copy 'wf' on ssd-read) and step 1 (matmul "
                       "'y' on compute) race"),
            std::string::npos)
      << error;
  // Write after read: exp overwrites bytes the write-back still reads.
  p = ssdPlan();
  p.steps[3].waits.clear();
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("step 2 (assign 'h' on d2h) and step 3 (exp"),
            std::string::npos)
      << error;
  // A wait on a step issued later, or on none at all.
  p = ssdPlan();
  p.steps[1].waits = {2, 0};
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("issued after it"), std::string::npos) << error;
  p.steps[1].waits = {99};
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("does not exist"), std::string::npos) << error;
  // A step off the queue that runs it.
  p = ssdPlan();
  p.steps[0].queue = Queue::Compute;
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("runs it on the ssd-read queue"), std::string::npos)
      << error;
}

TEST(StepOrder, QueuesAndWaitsRoundTripThroughPlanBin) {
  Plan p = ssdPlan(), q;
  std::string file, error;
  ASSERT_TRUE(serializePlan(p, file, error)) << error;
  ASSERT_TRUE(parsePlan(file, "mem", q, error)) << error;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    EXPECT_EQ(q.steps[i].queue, p.steps[i].queue);
    EXPECT_EQ(q.steps[i].waits, p.steps[i].waits);
  }
}

TEST(StepOrder, OrderThroughAnotherQueueNeedsNoSecondWait) {
  // 0 (q1) writes A; 1 (q2) reads A, waits 0; 2 (q3) reads A and B where
  // 1 wrote B: waiting for 1 orders it after 0 as well.
  std::vector<Queue> queues = {Queue::SsdRead, Queue::HostToDevice,
                               Queue::Compute};
  std::vector<StepAccesses> acc(3);
  Access a{Region::Arena, {0, 64}}, b{Region::Arena, {64, 128}};
  acc[0].writes = {a};
  acc[1].reads = {a};
  acc[1].writes = {b};
  acc[2].reads = {a, b};
  auto waits = deriveWaits(queues, acc, {0, 1, 2});
  EXPECT_EQ(waits[1], std::vector<uint32_t>{0});
  EXPECT_EQ(waits[2], std::vector<uint32_t>{1});
}

/// A random program of 2 to 41 steps over all queues, each reading or
/// writing 1 to 3 ranges: starting at a multiple of `grid` below
/// `starts * grid`, 1 to `longest` bytes long, in one of the first
/// `regions` regions.
void randomProgram(std::mt19937 &rng, uint64_t starts, uint64_t grid,
                   uint64_t longest, unsigned regions,
                   std::vector<Queue> &queues, std::vector<StepAccesses> &acc) {
  size_t n = 2 + rng() % 40;
  queues.assign(n, Queue::Compute);
  acc.assign(n, StepAccesses());
  for (size_t i = 0; i < n; ++i) {
    queues[i] = static_cast<Queue>(rng() % kNumQueues);
    for (int k = 0, m = 1 + rng() % 3; k < m; ++k) {
      uint64_t begin = rng() % starts * grid, len = 1 + rng() % longest;
      Access x{static_cast<Region>(1 + rng() % regions), {begin, begin + len}};
      (rng() % 2 ? acc[i].reads : acc[i].writes).push_back(x);
    }
  }
}

// Random programs over all queues: the derived waits pass the check, and
// each one is needed (dropping it makes the check fail).
TEST(StepOrder, DerivedWaitsAreRaceFreeAndEachIsNeeded) {
  std::mt19937 rng(7);
  size_t total = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Queue> queues;
    std::vector<StepAccesses> acc;
    randomProgram(rng, 16, 16, 48, 2, queues, acc);
    size_t n = queues.size();
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t(0));
    auto describe = [](size_t i) { return "step " + std::to_string(i); };
    auto waits = deriveWaits(queues, acc, order);
    for (const auto &w : waits)
      total += w.size();
    std::string why;
    ASSERT_TRUE(checkRaceFree(queues, waits, acc, order, describe, why)) << why;
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < waits[i].size(); ++k) {
        auto fewer = waits;
        fewer[i].erase(fewer[i].begin() + k);
        EXPECT_FALSE(checkRaceFree(queues, fewer, acc, order, describe, why))
            << "trial " << trial << ": step " << i << "'s wait for "
            << waits[i][k] << " is not needed";
      }
    // Everything on one queue needs no waits at all.
    std::vector<Queue> one(n, Queue::Compute);
    for (const auto &w : deriveWaits(one, acc, order))
      EXPECT_TRUE(w.empty());
  }
  EXPECT_GT(total, 500u); // The programs do cross queues.
}

// The same random programs checked without the sweep: every two steps
// whose accesses overlap where one writes are ordered, through queue order
// and the derived waits (a reachability walk over the whole program).
TEST(StepOrder, DerivedWaitsOrderEveryConflictingPair) {
  std::mt19937 rng(11);
  auto overlap = [](const std::vector<Access> &x,
                    const std::vector<Access> &y) {
    for (const Access &a : x)
      for (const Access &b : y)
        if (a.overlaps(b))
          return true;
    return false;
  };
  size_t pairs = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<Queue> queues;
    std::vector<StepAccesses> acc;
    randomProgram(rng, 24, 8, 64, 4, queues, acc);
    size_t n = queues.size();
    // Issue order: program order with a few steps moved earlier.
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t(0));
    for (int k = 0; k < 3; ++k) {
      size_t from = rng() % n, to = rng() % n;
      if (to < from)
        std::rotate(order.begin() + to, order.begin() + from,
                    order.begin() + from + 1);
    }
    auto waits = deriveWaits(queues, acc, order);
    // before[s]: the steps ordered before s (by position in `order`).
    std::vector<size_t> at(n);
    for (size_t k = 0; k < n; ++k)
      at[order[k]] = k;
    std::vector<std::vector<bool>> before(n, std::vector<bool>(n, false));
    for (size_t k = 0; k < n; ++k) {
      size_t s = order[k];
      std::vector<size_t> direct(waits[s].begin(), waits[s].end());
      for (size_t j = k; j-- > 0;)
        if (queues[order[j]] == queues[s]) {
          direct.push_back(order[j]);
          break;
        }
      for (size_t d : direct) {
        ASSERT_LT(at[d], k) << "trial " << trial;
        before[s][d] = true;
        for (size_t e = 0; e < n; ++e)
          if (before[d][e])
            before[s][e] = true;
      }
    }
    for (size_t k = 0; k < n; ++k)
      for (size_t j = 0; j < k; ++j) {
        size_t s = order[k], p = order[j];
        if (!overlap(acc[p].writes, acc[s].reads) &&
            !overlap(acc[p].writes, acc[s].writes) &&
            !overlap(acc[p].reads, acc[s].writes))
          continue;
        ++pairs;
        EXPECT_TRUE(before[s][p])
            << "trial " << trial << ": step " << s << " conflicts with step "
            << p << ", issued before it, and nothing orders them";
      }
  }
  EXPECT_GT(pairs, 2000u);
}

} // namespace
