// SsdStoreTest.cpp - The SSD tier against plain memory.

#include "runtime/tiers/SsdStore.h"

#include <gtest/gtest.h>

#include <cstdio>

#include <cstdlib>
#include <cstring>
#include <random>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace strata::tiers;

namespace {

std::string tempDir(const std::string &name) {
  std::string dir =
      ::testing::TempDir() + "/ssd-" + name + "-" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

struct Aligned {
  explicit Aligned(size_t n)
      : data(static_cast<char *>(std::aligned_alloc(kIoAlignment, n))),
        size(n) {}
  ~Aligned() { std::free(data); }
  char *data;
  size_t size;
};

class SsdStoreTest : public ::testing::TestWithParam<bool> {};

// Writes random data across stripes of two drives in many requests, reads
// it back in a different split, and compares.
TEST_P(SsdStoreTest, RoundTripsAcrossStripesAndDrives) {
  SsdOptions options;
  options.forceThreads = GetParam();
  options.stripeBytes = 64 * 1024;
  options.queueDepth = 8;
  std::string error;
  auto store =
      SsdStore::open({tempDir("a"), tempDir("b")}, 1 << 20, options, error);
  ASSERT_TRUE(store) << error;
  EXPECT_EQ(store->capacity(), uint64_t(1) << 20);
  Aligned data(1 << 20), back(1 << 20);
  std::mt19937 rng(7);
  for (size_t i = 0; i < data.size; ++i)
    data.data[i] = static_cast<char>(rng());
  std::vector<IoRequest> writes;
  for (uint64_t off = 0; off < data.size; off += 12 * 4096) {
    uint64_t n = std::min<uint64_t>(12 * 4096, data.size - off);
    writes.push_back({true, off, data.data + off, n});
  }
  ASSERT_TRUE(store->transfer(writes, error)) << error;
  std::memset(back.data, 0, back.size);
  ASSERT_TRUE(store->read(0, back.data, 5 * 4096 * 8, error)) << error;
  ASSERT_TRUE(store->read(5 * 4096 * 8, back.data + 5 * 4096 * 8,
                          back.size - 5 * 4096 * 8, error))
      << error;
  EXPECT_EQ(std::memcmp(data.data, back.data, data.size), 0);
  // Through memory registered with the store (fixed buffers), in place
  // and at an offset inside it.
  Aligned area(256 * 1024);
  SsdStore::Registration registration =
      store->registerMemory(area.data, area.size);
  if (std::string(store->engineName()) == "io_uring") {
    EXPECT_EQ(store->fixedBytes(), area.size);
  }
  std::memcpy(area.data + 64 * 1024, data.data + 4096, 64 * 1024);
  ASSERT_TRUE(store->write(128 * 1024, area.data + 64 * 1024, 64 * 1024, error))
      << error;
  std::memset(area.data, 0, area.size);
  ASSERT_TRUE(store->read(128 * 1024, area.data + 128 * 1024, 64 * 1024, error))
      << error;
  EXPECT_EQ(std::memcmp(area.data + 128 * 1024, data.data + 4096, 64 * 1024),
            0);
}

// A fixed buffer keeps the pages it pinned: after the memory is released
// and other memory registered (maybe at the same address), requests must
// reach the new memory, not the old pages.
TEST_P(SsdStoreTest, RegistrationFollowsTheMemory) {
  SsdOptions options;
  options.forceThreads = GetParam();
  options.stripeBytes = 64 * 1024;
  std::string error;
  auto store = SsdStore::open({tempDir("r")}, 1 << 20, options, error);
  ASSERT_TRUE(store) << error;
  const size_t n = 256 * 1024; // Past malloc's mmap threshold.
  for (int round = 0; round < 4; ++round) {
    Aligned buf(n);
    SsdStore::Registration registration = store->registerMemory(buf.data, n);
    std::memset(buf.data, 'a' + round, n);
    ASSERT_TRUE(store->write(0, buf.data, n, error)) << error;
    std::memset(buf.data, 0, n);
    ASSERT_TRUE(store->read(0, buf.data, n, error)) << error;
    EXPECT_EQ(buf.data[0], 'a' + round);
    EXPECT_EQ(buf.data[n - 1], 'a' + round);
    registration.reset();
    if (std::string(store->engineName()) == "io_uring") {
      EXPECT_EQ(store->fixedBytes(), 0u);
    }
  }
}

// The runtime's read and write queues call the store at the same time:
// two threads, each writing then reading back its own half many times,
// must each see their own data.
TEST_P(SsdStoreTest, ServesTwoThreadsAtOnce) {
  SsdOptions options;
  options.forceThreads = GetParam();
  options.stripeBytes = 64 * 1024;
  options.queueDepth = 4;
  std::string error;
  auto store = SsdStore::open({tempDir("c")}, 1 << 20, options, error);
  ASSERT_TRUE(store) << error;
  std::string errors[2];
  bool same[2] = {true, true};
  auto worker = [&](int t) {
    Aligned data(256 * 1024), back(256 * 1024);
    std::mt19937 rng(t + 1);
    uint64_t base = uint64_t(t) * 512 * 1024;
    for (int round = 0; round < 20; ++round) {
      for (size_t i = 0; i < data.size; ++i)
        data.data[i] = static_cast<char>(rng());
      uint64_t at = base + (round % 2) * data.size;
      if (!store->write(at, data.data, data.size, errors[t]) ||
          !store->read(at, back.data, back.size, errors[t]))
        return;
      same[t] = same[t] && std::memcmp(data.data, back.data, data.size) == 0;
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  for (int t : {0, 1}) {
    EXPECT_EQ(errors[t], "");
    EXPECT_TRUE(same[t]) << "thread " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, SsdStoreTest, ::testing::Values(false, true),
                         [](const auto &info) {
                           return info.param ? "threads" : "default";
                         });

TEST(SsdStore, RejectsUnalignedAndOutOfRangeRequests) {
  std::string error;
  auto store = SsdStore::open({tempDir("c")}, 1 << 20, SsdOptions(), error);
  ASSERT_TRUE(store) << error;
  Aligned buf(8192);
  EXPECT_FALSE(store->read(100, buf.data, 4096, error));
  EXPECT_NE(error.find("not 4 KiB-aligned"), std::string::npos) << error;
  EXPECT_FALSE(store->read(0, buf.data + 1, 4096, error));
  EXPECT_NE(error.find("not 4 KiB-aligned"), std::string::npos) << error;
  EXPECT_FALSE(store->read(store->capacity(), buf.data, 4096, error));
  EXPECT_NE(error.find("beyond the store"), std::string::npos) << error;
}

TEST(SsdStore, RefusesWhatDoesNotFit) {
  std::string error;
  auto store =
      SsdStore::open({tempDir("d")}, uint64_t(1) << 60, SsdOptions(), error);
  EXPECT_FALSE(store);
  EXPECT_NE(error.find("free; the plan needs"), std::string::npos) << error;
  // A missing directory is created; one that cannot be (its parent is a
  // file) is named in the error.
  std::string parent = tempDir("p");
  std::string missing = parent + "/new/dir";
  store = SsdStore::open({missing}, 1 << 20, SsdOptions(), error);
  EXPECT_TRUE(store) << error;
  store.reset();
  std::string file = parent + "/file";
  std::fclose(std::fopen(file.c_str(), "w"));
  store = SsdStore::open({file + "/dir"}, 1 << 20, SsdOptions(), error);
  EXPECT_FALSE(store);
  EXPECT_NE(error.find(file + "/dir"), std::string::npos) << error;
}

} // namespace
