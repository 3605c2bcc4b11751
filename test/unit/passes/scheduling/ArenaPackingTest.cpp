// ArenaPackingTest.cpp - Arena offsets: valid packings, and the indexed
// size-ordered placement against the plain scan it speeds up.

#include "passes/scheduling/ArenaPacking.h"
#include "runtime/artifact/Plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <utility>

using namespace strata;
using namespace strata::arena;
using strata::artifact::alignUp;

namespace {

/// The size-ordered placement as a plain loop: every placed buffer, in
/// (offset, end) order, scanned for each new one.
uint64_t referenceBySize(std::vector<Lifetime> &buffers, uint64_t alignment) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  std::vector<size_t> placed;
  uint64_t arena = 0;
  for (size_t i : order) {
    Lifetime &b = buffers[i];
    std::sort(placed.begin(), placed.end(), [&](size_t x, size_t y) {
      return std::pair(buffers[x].offset,
                       buffers[x].offset + buffers[x].bytes) <
             std::pair(buffers[y].offset, buffers[y].offset + buffers[y].bytes);
    });
    uint64_t offset = 0;
    for (size_t j : placed) {
      const Lifetime &o = buffers[j];
      if (o.end < b.start || o.start > b.end)
        continue;
      if (offset + b.bytes <= o.offset)
        break;
      offset = std::max(offset, alignUp(o.offset + o.bytes, alignment));
    }
    b.offset = offset;
    placed.push_back(i);
    arena = std::max(arena, offset + b.bytes);
  }
  return arena;
}

/// No two buffers live at one step share a byte; every offset is
/// aligned; the arena holds every buffer.
void expectValid(const std::vector<Lifetime> &buffers, uint64_t arena,
                 uint64_t alignment) {
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Lifetime &a = buffers[i];
    EXPECT_EQ(a.offset % alignment, 0u) << "buffer " << i;
    EXPECT_LE(a.offset + a.bytes, arena) << "buffer " << i;
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      const Lifetime &b = buffers[j];
      bool together = a.start <= b.end && b.start <= a.end;
      bool apart = a.offset + a.bytes <= b.offset ||
                   b.offset + b.bytes <= a.offset || !a.bytes || !b.bytes;
      ASSERT_TRUE(!together || apart)
          << "buffers " << i << " and " << j << " overlap";
    }
  }
}

/// A training-step-like mix: many short-lived buffers, some living from
/// the forward pass to the backward pass, some across the whole step,
/// sizes over four orders of magnitude (some equal, for ties).
std::vector<Lifetime> randomBuffers(unsigned seed, size_t n, int64_t steps) {
  std::mt19937_64 rng(seed);
  std::vector<Lifetime> out;
  for (size_t i = 0; i < n; ++i) {
    Lifetime b;
    int64_t start = static_cast<int64_t>(rng() % steps);
    int64_t length;
    switch (rng() % 8) {
    case 0:
      length = static_cast<int64_t>(rng() % steps); // Long.
      break;
    case 1:
      length = steps - start - 1 - (steps - start - 1) / 2; // To backward.
      break;
    default:
      length = static_cast<int64_t>(rng() % 6); // Short.
    }
    b.start = start;
    b.end = std::min(steps - 1, start + length);
    b.bytes = rng() % 5 == 0 ? 4096 : 64 * (1 + rng() % 20000);
    out.push_back(b);
  }
  return out;
}

/// The most bytes live at one step: a sweep over every start and end.
int64_t livePeak(const std::vector<Lifetime> &buffers) {
  std::vector<std::pair<int64_t, int64_t>> changes;
  for (const Lifetime &b : buffers) {
    changes.push_back({b.start, static_cast<int64_t>(b.bytes)});
    changes.push_back({b.end + 1, -static_cast<int64_t>(b.bytes)});
  }
  std::sort(changes.begin(), changes.end()); // Ends before starts.
  int64_t live = 0, peak = 0;
  for (const auto &[step, delta] : changes)
    peak = std::max(peak, live += delta);
  return peak;
}

TEST(ArenaPacking, BySizeMatchesThePlainScan) {
  for (unsigned seed = 1; seed <= 12; ++seed) {
    size_t n = seed <= 6 ? 300 : 3000;
    int64_t steps = seed % 3 == 0 ? 40 : 5000;
    std::vector<Lifetime> fast = randomBuffers(seed, n, steps), plain = fast;
    uint64_t alignment = seed % 2 ? 64 : 4096;
    uint64_t arena = placeBySize(fast, alignment);
    EXPECT_EQ(arena, referenceBySize(plain, alignment)) << "seed " << seed;
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(fast[i].offset, plain[i].offset)
          << "seed " << seed << ", buffer " << i;
  }
}

TEST(ArenaPacking, PlacementsAreValid) {
  for (unsigned seed = 20; seed < 26; ++seed) {
    std::vector<Lifetime> buffers = randomBuffers(seed, 800, 900);
    std::vector<Lifetime> bySize = buffers, inTime = buffers, best = buffers;
    expectValid(bySize, placeBySize(bySize, 64), 64);
    expectValid(inTime, placeInTimeOrder(inTime, 64), 64);
    uint64_t arena = placeBuffers(best, 64);
    expectValid(best, arena, 64);
    EXPECT_EQ(arena,
              std::min(placeBySize(buffers, 64), placeInTimeOrder(inTime, 64)));
  }
}

// Nested lifetimes (a forward pass whose activations the backward pass
// frees in reverse order) need exactly their largest simultaneous sum.
TEST(ArenaPacking, NestedLifetimesPackToTheirPeak) {
  std::vector<Lifetime> buffers;
  uint64_t peak = 0;
  for (int64_t i = 0; i < 50; ++i) {
    buffers.push_back(
        {static_cast<uint64_t>(64 * (1 + (i * 7) % 13)), i, 99 - i});
    peak += buffers.back().bytes;
  }
  std::vector<Lifetime> inTime = buffers;
  EXPECT_EQ(placeInTimeOrder(inTime, 64), peak);
  EXPECT_EQ(placeBuffers(buffers, 64), peak);
}

// Thousands of nested lifetimes, all overlapping in the middle (the case
// where the size-ordered scan is quadratic): the peak, fast.
TEST(ArenaPacking, ManyNestedLifetimesPackToTheirPeak) {
  std::vector<Lifetime> buffers;
  uint64_t peak = 0;
  for (int64_t i = 0; i < 20000; ++i) {
    buffers.push_back({128, i, 39999 - i});
    peak += 128;
  }
  EXPECT_EQ(placeBuffers(buffers, 64), peak);
  for (size_t i = 1; i < buffers.size(); ++i)
    ASSERT_NE(buffers[i].offset, buffers[i - 1].offset);
}

// Under a budget the live bytes already exceed, no placement fits: the
// time-ordered one is kept (valid) without the size-ordered scan; under
// one they meet, the result is as without a budget.
TEST(ArenaPacking, ABudgetNoPlacementMeetsSkipsTheSizeOrderedScan) {
  std::vector<Lifetime> buffers = randomBuffers(31, 5000, 6000);
  std::vector<Lifetime> plain = buffers, within = buffers;
  int64_t peak = livePeak(buffers);
  std::vector<Lifetime> over = buffers, inTime = buffers;
  uint64_t timeArena = placeInTimeOrder(inTime, 64);
  uint64_t arena =
      placeBuffers(over, 64, 50000, static_cast<uint64_t>(peak) - 1);
  EXPECT_EQ(arena, timeArena);
  expectValid(over, arena, 64);
  uint64_t best = placeBuffers(plain, 64);
  EXPECT_LT(best, timeArena) << "the case needs the size-ordered scan";
  EXPECT_EQ(placeBuffers(within, 64, 50000, 2 * timeArena), best);
}

// The peak the time-ordered placement reports is the most bytes live at
// one step, as a sweep over every start and end finds it.
TEST(ArenaPacking, TheTimeOrderedPlacementReportsThePeak) {
  for (unsigned seed = 40; seed < 46; ++seed) {
    std::vector<Lifetime> buffers = randomBuffers(seed, 2000, 300 + seed);
    int64_t expected = livePeak(buffers);
    uint64_t peak = 0;
    placeInTimeOrder(buffers, 64, &peak);
    EXPECT_EQ(peak, static_cast<uint64_t>(expected)) << "seed " << seed;
  }
}

// Stopped past a limit, the size-ordered scan says more than the limit
// (and no more than the whole packing needs); at the whole packing's size
// it is not stopped, and every offset is the plain scan's.
TEST(ArenaPacking, TheSizeOrderedScanStopsPastItsLimit) {
  for (unsigned seed = 50; seed < 56; ++seed) {
    std::vector<Lifetime> buffers = randomBuffers(seed, 1500, 4000);
    std::vector<Lifetime> whole = buffers, atWhole = buffers;
    uint64_t arena = placeBySize(whole, 64);
    for (uint64_t limit : {arena / 3, arena / 2, arena - 1}) {
      std::vector<Lifetime> stopped = buffers;
      uint64_t said = placeBySize(stopped, 64, limit);
      EXPECT_GT(said, limit) << "seed " << seed;
      EXPECT_LE(said, arena) << "seed " << seed;
    }
    EXPECT_EQ(placeBySize(atWhole, 64, arena), arena);
    for (size_t i = 0; i < buffers.size(); ++i)
      ASSERT_EQ(atWhole[i].offset, whole[i].offset) << "seed " << seed;
  }
}

// A caller that drops plans over the budget may let the packing stop once
// it is over; one within the budget is the packing it always was, offsets
// and all.
TEST(ArenaPacking, APackingOverTheBudgetMayStopOnlyThere) {
  for (unsigned seed = 60; seed < 64; ++seed) {
    std::vector<Lifetime> buffers = randomBuffers(seed, 5000, 6000);
    std::vector<Lifetime> plain = buffers, within = buffers, over = buffers;
    uint64_t best = placeBuffers(plain, 64);
    EXPECT_EQ(placeBuffers(within, 64, 50000, best, /*overMayStop=*/true),
              best);
    for (size_t i = 0; i < buffers.size(); ++i)
      ASSERT_EQ(within[i].offset, plain[i].offset) << "seed " << seed;
    EXPECT_GT(placeBuffers(over, 64, 50000, best - 1, /*overMayStop=*/true),
              best - 1);
  }
}

// The cache gives what placeBuffers gives, offsets and size, whether it
// makes the packing or takes it: for the same buffers met again after
// others, and not for buffers that differ in one size or one lifetime, or
// for the same buffers under another alignment or budget. Past its
// capacity the oldest packing is made again.
TEST(ArenaPacking, TheCacheGivesWhatPackingGives) {
  PackingCache cache;
  std::vector<std::vector<Lifetime>> inputs;
  for (unsigned seed = 70; seed < 74; ++seed)
    inputs.push_back(randomBuffers(seed, 800, 900));
  // One size and one lifetime changed: another packing.
  inputs.push_back(inputs[0]);
  inputs.back()[17].bytes += 64;
  inputs.push_back(inputs[0]);
  inputs.back()[400].end = inputs.back()[400].start;
  auto check = [&](const std::vector<Lifetime> &in, uint64_t alignment,
                   uint64_t enough, bool overMayStop) {
    std::vector<Lifetime> plain = in, cached = in;
    for (Lifetime &b : cached)
      b.offset = 12345; // Whatever the caller's buffers held.
    uint64_t want = placeBuffers(plain, alignment, 50000, enough, overMayStop);
    ASSERT_EQ(cache.place(cached, alignment, 50000, enough, overMayStop), want);
    // A packing stopped over the budget gives only its size.
    if (overMayStop && want > enough)
      return;
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(cached[i].offset, plain[i].offset) << "buffer " << i;
  };
  for (int pass = 0; pass < 2; ++pass)
    for (const auto &in : inputs)
      check(in, 64, 0, false);
  EXPECT_EQ(cache.misses, inputs.size());
  EXPECT_EQ(cache.hits, inputs.size());
  // Another alignment, a budget, a budget the packing may stop at.
  std::vector<Lifetime> plain = inputs[1];
  uint64_t best = placeBuffers(plain, 64);
  check(inputs[1], 4096, 0, false);
  check(inputs[1], 64, best - 1, false);
  check(inputs[1], 64, best - 1, true);
  check(inputs[1], 64, best - 1, true);
  EXPECT_EQ(cache.misses, inputs.size() + 3);
  // 20 more packings: the first input's is gone, the last ones' are kept.
  for (unsigned seed = 80; seed < 100; ++seed)
    check(randomBuffers(seed, 50, 60), 64, 0, false);
  size_t misses = cache.misses;
  check(inputs[0], 64, 0, false);
  EXPECT_EQ(cache.misses, misses + 1);
  check(randomBuffers(99, 50, 60), 64, 0, false);
  EXPECT_EQ(cache.misses, misses + 1);
}

TEST(ArenaPacking, NothingToPlace) {
  std::vector<Lifetime> none;
  EXPECT_EQ(placeBySize(none, 64), 0u);
  EXPECT_EQ(placeInTimeOrder(none, 64), 0u);
  EXPECT_EQ(placeBuffers(none, 64), 0u);
}

} // namespace
