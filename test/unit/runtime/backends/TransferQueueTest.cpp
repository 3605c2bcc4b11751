// TransferQueueTest.cpp - The transfer queue: order, waiting, failures.

#include "runtime/backends/TransferQueue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using namespace strata::runtime;

namespace {

TEST(TransferQueue, RunsJobsInOrderAndWaitsForThem) {
  TransferQueue queue;
  std::vector<int> order;
  std::atomic<bool> release{false};
  // The first job blocks until released: waiting for a later job must
  // wait for it too (first in, first out).
  uint64_t first = queue.submit([&](std::string &) {
    while (!release)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    order.push_back(1);
    return true;
  });
  uint64_t second = queue.submit([&](std::string &) {
    order.push_back(2);
    return true;
  });
  EXPECT_EQ(first, 1u);
  EXPECT_EQ(second, 2u);
  EXPECT_EQ(queue.finished(), 0u);
  release = true;
  std::string error;
  ASSERT_TRUE(queue.waitFor(second, error)) << error;
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_TRUE(queue.drain(error));
}

TEST(TransferQueue, KeepsTheFirstFailureAndSkipsWhatFollows) {
  TransferQueue queue;
  std::atomic<int> ran{0};
  queue.submit([&](std::string &error) {
    error = "disk full";
    return false;
  });
  queue.submit([&](std::string &) {
    ++ran;
    return true;
  });
  std::string error;
  EXPECT_FALSE(queue.drain(error));
  EXPECT_EQ(error, "disk full");
  EXPECT_EQ(ran.load(), 0);
}

} // namespace
