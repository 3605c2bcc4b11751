// BackendTest.cpp - The backends' ordering, memory and error contract.

#include "runtime/backends/Backend.h"
#include "runtime/backends/async_test/AsyncTestBackend.h"
#include "runtime/exec/BackendRegistry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

using namespace strata;
using namespace strata::runtime;
using artifact::Kernel;
using artifact::Step;

namespace {

void sleepMs(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

Step negStep() {
  Step s;
  s.kernel = Kernel::Neg;
  s.inputs = {0};
  s.outputs = {1};
  return s;
}

TensorRef ref(void *p, int64_t n) {
  TensorRef t;
  t.dtype = DType::F32;
  t.shape = {n};
  t.data = p;
  return t;
}

TEST(AsyncTestBackend, AWaitBindsToTheLatestRecordAtTheTimeOfTheCall) {
  AsyncTestBackend b;
  b.setEventCount(2);
  std::atomic<int> first{0}, second{0}, seenFirst{-1}, seenSecond{-1};
  // Event 0 recorded after slow work on the h2d queue, then waited for on
  // compute: compute sees the work done.
  b.hostTask(Queue::HostToDevice, [&](std::string &) {
    sleepMs(30);
    first = 1;
    return true;
  });
  b.record(Queue::HostToDevice, 0);
  b.wait(Queue::Compute, 0);
  b.hostTask(Queue::Compute, [&](std::string &) {
    seenFirst = first.load();
    return true;
  });
  // Event 1 waited for before it is ever recorded: CUDA treats that as
  // complete, so the d2h queue does not wait for the (much slower) work
  // recorded after the wait was issued.
  b.wait(Queue::DeviceToHost, 1);
  b.hostTask(Queue::DeviceToHost, [&](std::string &) {
    seenSecond = second.load();
    return true;
  });
  b.hostTask(Queue::SsdRead, [&](std::string &) {
    sleepMs(300);
    second = 1;
    return true;
  });
  b.record(Queue::SsdRead, 1);
  std::string error;
  ASSERT_TRUE(b.synchronize(error)) << error;
  EXPECT_EQ(seenFirst, 1);
  EXPECT_EQ(seenSecond, 0);
}

TEST(AsyncTestBackend, AMissingWaitReadsStaleBytesAndTheWaitFixesIt) {
  for (bool withWait : {false, true}) {
    AsyncTestBackend b;
    b.setEventCount(1);
    std::string error;
    const int64_t n = 1024;
    void *in = b.allocDevice(n * 4, error);
    void *out = b.allocDevice(n * 4, error);
    ASSERT_TRUE(in && out) << error;
    std::vector<float> ones(n, 1.0f), result(n, 0.0f);
    // The copy to the device is slow to start; compute runs the kernel
    // on what is there unless it waits for the copy.
    b.hostTask(Queue::HostToDevice, [](std::string &) {
      sleepMs(20);
      return true;
    });
    StepLabel label;
    ASSERT_TRUE(
        b.copy(Queue::HostToDevice, in, ones.data(), n * 4, true, label));
    b.record(Queue::HostToDevice, 0);
    if (withWait)
      b.wait(Queue::Compute, 0);
    Step neg = negStep();
    ASSERT_TRUE(b.launch(Queue::Compute, neg, {ref(in, n)}, {ref(out, n)},
                         KernelContext(), label));
    ASSERT_TRUE(b.synchronize(error)) << error;
    ASSERT_TRUE(b.copyFromDevice(result.data(), out, n * 4, error)) << error;
    EXPECT_EQ(result[n - 1], withWait ? -1.0f : -0.0f);
  }
}

TEST(AsyncTestBackend, KernelsOnlyTakeDeviceMemory) {
  AsyncTestBackend b;
  b.setEventCount(0);
  std::string error;
  void *out = b.allocDevice(16, error);
  std::vector<float> host(4, 1.0f);
  Step neg = negStep();
  StepLabel label;
  label.index = 7;
  label.text = "neg -> 'y'";
  b.launch(Queue::Compute, neg, {ref(host.data(), 4)}, {ref(out, 4)},
           KernelContext(), label);
  EXPECT_FALSE(b.synchronize(error));
  EXPECT_NE(error.find("step 7 (neg -> 'y'): an operand is not device "
                       "memory"),
            std::string::npos)
      << error;
}

TEST(AsyncTestBackendDeathTest, TheHostCannotTouchDeviceMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        AsyncTestBackend b;
        std::string error;
        auto *p = static_cast<volatile float *>(b.allocDevice(64, error));
        p[0] = 1.0f;
      },
      "");
}

TEST(AsyncTestBackend, AFailureIsReportedAndLaterWorkIsSkipped) {
  AsyncTestBackend b;
  b.setEventCount(1);
  std::atomic<bool> ranAfter{false};
  b.hostTask(Queue::SsdRead, [](std::string &error) {
    error = "step 3 (SSD transfer of 'w'): injected";
    return false;
  });
  b.record(Queue::SsdRead, 0);
  b.wait(Queue::Compute, 0); // Must not hang on the skipped record.
  b.hostTask(Queue::Compute, [&](std::string &) {
    ranAfter = true;
    return true;
  });
  std::string error;
  EXPECT_FALSE(b.synchronize(error));
  EXPECT_EQ(error, "step 3 (SSD transfer of 'w'): injected");
  EXPECT_FALSE(ranAfter);
}

TEST(Backends, UnknownNamesAreErrorsListingWhatExists) {
  std::string error;
  EXPECT_EQ(makeBackend("tpu", error), nullptr);
  EXPECT_NE(error.find("unknown backend 'tpu' (this build has: cpu, "
                       "async-test"),
            std::string::npos)
      << error;
  ASSERT_NE(makeBackend("cpu", error), nullptr);
  ASSERT_NE(makeBackend("async-test", error), nullptr);
}

TEST(Backends, CudaStartsOrSaysWhyNot) {
  std::string error;
  std::unique_ptr<Backend> cuda = makeBackend("cuda", error);
  if (cuda) {
    EXPECT_STREQ(cuda->name(), "cuda");
    return;
  }
  // Without a GPU (or without CUDA in the build) the reason is given.
  EXPECT_TRUE(error.rfind("no GPU: ", 0) == 0 ||
              error.find("no CUDA backend") != std::string::npos)
      << error;
}

} // namespace
