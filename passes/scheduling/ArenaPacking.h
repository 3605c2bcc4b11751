// ArenaPacking.h - Offsets for buffers with lifetimes in one arena.
//
// The memory planner gives every arena buffer a lifetime (first and last
// step index, inclusive) and needs offsets such that no two buffers live
// at the same time share a byte, in as small an arena as it can find. Two
// heuristics, the better one kept: largest first at the lowest free offset
// (placeBySize), and in time order into the smallest free gap
// (placeInTimeOrder). The planner scores thousands of placements of
// deep models, each with tens of thousands of buffers, so both are kept
// fast; the buffers are plain numbers so that they are tested alone
// (test/unit/passes, the compiler's unit tests). No MLIR here.

#ifndef STRATA_PASSES_SCHEDULING_ARENAPACKING_H
#define STRATA_PASSES_SCHEDULING_ARENAPACKING_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::arena {

/// One buffer: its size, its lifetime in step indices (inclusive) and,
/// once placed, its offset.
struct Lifetime {
  uint64_t bytes = 0;
  int64_t start = 0;
  int64_t end = 0;
  uint64_t offset = 0;
};

/// Largest first (stable on ties), each at the lowest offset the placed
/// buffers whose lifetimes meet its own leave free below the first gap
/// that holds it; `alignment` rounds the offsets up. Returns the arena
/// size. Each buffer looks only at the placed ones that can meet it (a
/// time-bucket index), so short-lived buffers cost little however many
/// there are. It stops once the arena needs more than `stopAbove` bytes
/// (returning what it needs by then, more than `stopAbove`; the buffers
/// not yet placed keep the offsets they had).
uint64_t placeBySize(std::vector<Lifetime> &buffers, uint64_t alignment,
                     uint64_t stopAbove = UINT64_MAX);

/// In time order: a buffer takes the smallest free gap that holds it (the
/// lowest such gap on ties) when it starts and returns it when it ends.
/// O(n log n); stack-like (nested) lifetimes pack perfectly. With `peak`,
/// sets it to the most bytes live at one step (no placement needs less).
uint64_t placeInTimeOrder(std::vector<Lifetime> &buffers, uint64_t alignment,
                          uint64_t *peak = nullptr);

/// Both placements, the smaller arena wins (the size-ordered one only up
/// to `sizeOrderLimit` buffers, and for thousands of buffers not when the
/// time-ordered one already needs only the most bytes live at one step,
/// nor when those are over `enough` (> 0: a device budget, which no
/// placement then meets)). Sets every offset; returns the arena size.
/// With `overMayStop` (and `enough` > 0), for a caller that drops a plan
/// over `enough`: where both placements need more than `enough`, the
/// size-ordered one may stop early, and the result is then only some
/// size over `enough`, its offsets no packing.
uint64_t placeBuffers(std::vector<Lifetime> &buffers, uint64_t alignment,
                      size_t sizeOrderLimit = 50000, uint64_t enough = 0,
                      bool overMayStop = false);

/// The last packings made, their buffers and offsets: placeBuffers()
/// through it gives the same offsets and size (only the size where the
/// packing stopped over `enough`), and takes them from here
/// when the same buffers (sizes and lifetimes, in the same order) come
/// again under the same arguments (`overMayStop` aside where the packing
/// kept is within `enough`). The memory planner packs the same lifetimes
/// under two windows, and the tier planner scores placements
/// that differ only off the device (where a state lives: host or SSD)
/// one after another, and each packs the same arena (GPT-3 13B: a third
/// of its packing time was on packings made a few scores before). Not
/// thread-safe: one per thread.
class PackingCache {
public:
  uint64_t place(std::vector<Lifetime> &buffers, uint64_t alignment,
                 size_t sizeOrderLimit = 50000, uint64_t enough = 0,
                 bool overMayStop = false);
  /// Packings taken from the cache, and made.
  size_t hits = 0, misses = 0;

private:
  struct Entry {
    uint64_t hash;
    uint64_t alignment, enough, arena;
    size_t sizeOrderLimit;
    bool overMayStop;
    /// The buffers, their offsets as placed.
    std::vector<Lifetime> buffers;
  };
  /// Most recently used first; at most kEntries.
  std::vector<Entry> entries;
  static constexpr size_t kEntries = 16;
};

} // namespace strata::arena

#endif // STRATA_PASSES_SCHEDULING_ARENAPACKING_H
