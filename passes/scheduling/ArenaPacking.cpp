// ArenaPacking.cpp - Offsets for buffers with lifetimes in one arena.

#include "passes/scheduling/ArenaPacking.h"

#include "runtime/artifact/Plan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <utility>

namespace strata::arena {

using artifact::alignUp;

// The scan is the simple one: the placed buffers in offset order, from
// the bottom, skipping those whose lifetimes miss the new buffer's, up to
// the first one above a gap that holds it. Only the placed buffers that
// can meet the new one matter, so the lifetimes' span is cut into time
// buckets: a buffer within two adjacent buckets (short-lived, as most
// are) is listed in those buckets, with its keys, a longer one in one list
// of long buffers. A short buffer then scans the long list merged with its own
// buckets' lists, in offset order; a long one scans every placed buffer.
// Either way it meets the same buffers in the same order as a scan of
// all of them would: the offsets are those of the simple scan.
uint64_t placeBySize(std::vector<Lifetime> &buffers, uint64_t alignment,
                     uint64_t stopAbove) {
  size_t n = buffers.size();
  if (n == 0)
    return 0;
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  int64_t first = buffers[0].start, last = buffers[0].end;
  for (const Lifetime &b : buffers) {
    first = std::min(first, b.start);
    last = std::max(last, b.end);
  }
  constexpr uint64_t kBuckets = 512;
  // Unsigned: the span of int64 step indices may not fit int64.
  uint64_t width =
      (static_cast<uint64_t>(last) - static_cast<uint64_t>(first)) / kBuckets +
      1;
  auto bucketOf = [&](int64_t t) {
    return static_cast<size_t>(
        (static_cast<uint64_t>(t) - static_cast<uint64_t>(first)) / width);
  };
  // A placed buffer as the merged scans read it, held in the lists
  // themselves: those scans are most of the work, and read memory in
  // order this way. `top` is its end aligned up (the lowest offset a
  // buffer above it can take), worked out once: a division in the scan's
  // step was most of its time. Entries at one offset may be met in any
  // order (each moves the scan to at least its top; where one leaves room
  // below it, all do), so ordering by the aligned end changes no offset.
  struct Placed {
    uint64_t offset, top;
    int64_t start, end;
    bool operator<(const Placed &o) const {
      return std::pair(offset, top) < std::pair(o.offset, o.top);
    }
  };
  // Each buffer's top, set as it is placed (the merges read the long
  // buffers' often).
  std::vector<uint64_t> tops(n);
  auto placed = [&](uint32_t i) {
    const Lifetime &b = buffers[i];
    return Placed{b.offset, tops[i], b.start, b.end};
  };
  std::vector<std::vector<Placed>> buckets(bucketOf(last) + 1);
  // The long buffers by index: when most buffers are long (every
  // activation kept for the backward pass) this list is long, and moving
  // 4-byte entries on each insertion keeps that cheap.
  std::vector<uint32_t> longOnes;
  // Every placed buffer, for the long ones' scans: those scans are most
  // of the work (a long buffer meets most of the placed ones and usually
  // lands above them all), so the entries are held in offset order in
  // memory, in chunks (an insertion moves one chunk's entries), each with
  // the span of its lifetimes: a chunk whose lifetimes all end before the
  // new buffer starts, or all start after it ends, is passed whole.
  struct Chunk {
    std::vector<Placed> entries;
    int64_t first, last; // The least start and the greatest end.
    uint64_t top;        // The greatest top.
  };
  constexpr size_t kChunk = 64;
  std::vector<Chunk> all;
  auto summarise = [](Chunk &c) {
    c.first = std::numeric_limits<int64_t>::max();
    c.last = std::numeric_limits<int64_t>::min();
    c.top = 0;
    for (const Placed &p : c.entries) {
      c.first = std::min(c.first, p.start);
      c.last = std::max(c.last, p.end);
      c.top = std::max(c.top, p.top);
    }
  };
  auto insertAll = [&](const Placed &self) {
    if (all.empty())
      all.push_back({{}, self.start, self.end, self.top});
    // The first chunk whose last entry is above `self` (after equal ones,
    // as upper_bound on one list would; the order among equal entries
    // changes no scan), else the last chunk.
    auto chunk = std::upper_bound(
        all.begin(), all.end() - 1, self,
        [](const Placed &p, const Chunk &c) { return p < c.entries.back(); });
    std::vector<Placed> &list = chunk->entries;
    list.insert(std::upper_bound(list.begin(), list.end(), self), self);
    chunk->first = std::min(chunk->first, self.start);
    chunk->last = std::max(chunk->last, self.end);
    chunk->top = std::max(chunk->top, self.top);
    if (list.size() >= 2 * kChunk) {
      Chunk upper{{list.begin() + kChunk, list.end()}, 0, 0, 0};
      list.resize(kChunk);
      summarise(*chunk);
      summarise(upper);
      all.insert(chunk + 1, std::move(upper));
    }
  };
  auto below = [&](const Placed &p, uint32_t j) { return p < placed(j); };
  uint64_t arena = 0;
  for (uint32_t i : order) {
    Lifetime &b = buffers[i];
    uint64_t offset = 0;
    // Steps the scan past a placed buffer; false where `b` fits below it.
    auto pass = [&](const Placed &other) {
      if (other.end < b.start || other.start > b.end)
        return true; // Lifetimes apart.
      if (offset + b.bytes <= other.offset)
        return false;
      offset = std::max(offset, other.top);
      return true;
    };
    size_t lo = bucketOf(b.start), hi = bucketOf(b.end);
    bool isShort = hi - lo <= 1;
    if (isShort) {
      // The long list and up to two buckets merged in offset order (a
      // buffer in both buckets is met twice; the second meeting changes
      // nothing).
      const std::vector<Placed> *lists[2] = {&buckets[lo], &buckets[hi]};
      size_t count = hi == lo ? 1 : 2;
      size_t at[2] = {0, 0}, atLong = 0;
      while (true) {
        const Placed *next = nullptr;
        size_t pick = 0;
        for (size_t k = 0; k < count; ++k)
          if (at[k] < lists[k]->size() &&
              (!next || (*lists[k])[at[k]] < *next)) {
            next = &(*lists[k])[at[k]];
            pick = k;
          }
        if (atLong < longOnes.size()) {
          Placed head = placed(longOnes[atLong]);
          if (!next || head < *next) {
            if (!pass(head))
              break;
            ++atLong;
            continue;
          }
        }
        if (!next || !pass(*next))
          break;
        ++at[pick];
      }
    } else {
      bool going = true;
      for (const Chunk &c : all) {
        // Every lifetime apart, or every top below the scan (each entry
        // then leaves the offset as it is, and none is above a gap).
        if (c.last < b.start || c.first > b.end || c.top < offset)
          continue;
        for (const Placed &other : c.entries)
          if (!(going = pass(other)))
            break;
        if (!going)
          break;
      }
    }
    b.offset = offset;
    tops[i] = alignUp(offset + b.bytes, alignment);
    Placed self = placed(i);
    insertAll(self);
    auto insert = [&](std::vector<Placed> &list) {
      list.insert(std::upper_bound(list.begin(), list.end(), self), self);
    };
    if (isShort) {
      insert(buckets[lo]);
      if (hi != lo)
        insert(buckets[hi]);
    } else {
      longOnes.insert(
          std::upper_bound(longOnes.begin(), longOnes.end(), self, below), i);
    }
    arena = std::max(arena, offset + b.bytes);
    // The arena only grows: past `stopAbove` the caller has its answer.
    if (arena > stopAbove)
      return arena;
  }
  return arena;
}

/// In time order: a buffer takes the smallest free gap that holds it (the
/// lowest such gap on ties) when it starts and returns it when it ends.
/// O(n log n) whatever the lifetimes; stack-like (nested) lifetimes, as a
/// forward and backward pass make, pack perfectly.
uint64_t placeInTimeOrder(std::vector<Lifetime> &buffers, uint64_t alignment,
                          uint64_t *peak) {
  size_t n = buffers.size();
  std::vector<uint32_t> byStart(n), byEnd(n);
  for (size_t i = 0; i < n; ++i)
    byStart[i] = byEnd[i] = static_cast<uint32_t>(i);
  std::sort(byStart.begin(), byStart.end(), [&](uint32_t a, uint32_t b) {
    if (buffers[a].start != buffers[b].start)
      return buffers[a].start < buffers[b].start;
    return buffers[a].bytes > buffers[b].bytes;
  });
  std::sort(byEnd.begin(), byEnd.end(), [&](uint32_t a, uint32_t b) {
    return buffers[a].end < buffers[b].end;
  });
  // Free gaps below `top`, by offset (for merging) and by (size, offset).
  std::map<uint64_t, uint64_t> gapAt;
  std::set<std::pair<uint64_t, uint64_t>> gapBySize;
  uint64_t top = 0, arena = 0, live = 0, most = 0;
  auto addGap = [&](uint64_t lo, uint64_t hi) {
    auto next = gapAt.lower_bound(lo);
    if (next != gapAt.end() && next->first == hi) { // Merge with the next.
      hi = next->first + next->second;
      gapBySize.erase({next->second, next->first});
      next = gapAt.erase(next);
    }
    if (next != gapAt.begin()) { // Merge with the previous.
      auto prev = std::prev(next);
      if (prev->first + prev->second == lo) {
        lo = prev->first;
        gapBySize.erase({prev->second, prev->first});
        gapAt.erase(prev);
      }
    }
    if (hi == top) { // A gap at the top lowers it.
      top = lo;
      return;
    }
    gapAt[lo] = hi - lo;
    gapBySize.insert({hi - lo, lo});
  };
  size_t e = 0;
  for (uint32_t i : byStart) {
    Lifetime &b = buffers[i];
    // Lifetimes are inclusive: what ended before this start is free.
    for (; e < n && buffers[byEnd[e]].end < b.start; ++e) {
      const Lifetime &done = buffers[byEnd[e]]; // Placed: it started earlier.
      addGap(done.offset, done.offset + done.bytes);
      live -= done.bytes;
    }
    // What lives at this start (once the ties starting with it are in).
    most = std::max(most, live += b.bytes);
    uint64_t size = alignUp(b.bytes, alignment);
    auto fit = gapBySize.lower_bound({size, 0});
    if (fit != gapBySize.end()) {
      auto [gapSize, lo] = *fit;
      gapBySize.erase(fit);
      gapAt.erase(lo);
      b.offset = lo;
      if (gapSize > size) {
        gapAt[lo + size] = gapSize - size;
        gapBySize.insert({gapSize - size, lo + size});
      }
    } else {
      b.offset = top;
      top += size;
    }
    arena = std::max(arena, b.offset + b.bytes);
  }
  if (peak)
    *peak = most;
  return arena;
}

uint64_t placeBuffers(std::vector<Lifetime> &buffers, uint64_t alignment,
                      size_t sizeOrderLimit, uint64_t enough,
                      bool overMayStop) {
  std::vector<Lifetime> inTime = buffers;
  uint64_t peak = 0;
  uint64_t timeArena = placeInTimeOrder(inTime, alignment, &peak);
  constexpr size_t kSkipOptimalFrom = 4096;
  // No placement needs less than the most bytes live at one step. When
  // the time-ordered one needs no more (nested lifetimes, as a forward
  // and a backward pass make), the size-ordered scan, quadratic when most
  // lifetimes overlap, cannot do better; past a few thousand buffers it is
  // then not run (below, it runs and wins ties, as it always has).
  if (buffers.size() >= kSkipOptimalFrom) {
    // Optimal already; or over the budget whatever the placement.
    if (timeArena <= peak || (enough > 0 && peak > enough)) {
      buffers = std::move(inTime);
      return timeArena;
    }
  }
  if (buffers.size() <= sizeOrderLimit) {
    // The size-ordered packing wins ties, so it is given up once it needs
    // more than the time-ordered one (the offsets are then the time-ordered
    // ones, as if it had run to the end); and, for a caller that drops a
    // plan over `enough`, once both are over it.
    uint64_t stopAbove = timeArena;
    if (overMayStop && enough > 0 && timeArena > enough)
      stopAbove = enough;
    uint64_t sizeArena = placeBySize(buffers, alignment, stopAbove);
    if (sizeArena <= timeArena)
      return sizeArena; // Stopped over `enough`, or the smaller.
  }
  buffers = std::move(inTime);
  return timeArena;
}

uint64_t PackingCache::place(std::vector<Lifetime> &buffers, uint64_t alignment,
                             size_t sizeOrderLimit, uint64_t enough,
                             bool overMayStop) {
  // FNV-1a over every input; an entry is used only when all of them match.
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { hash = (hash ^ v) * 1099511628211ull; };
  for (const Lifetime &b : buffers) {
    mix(b.bytes);
    mix(static_cast<uint64_t>(b.start));
    mix(static_cast<uint64_t>(b.end));
  }
  for (size_t k = 0; k < entries.size(); ++k) {
    Entry &e = entries[k];
    // Whether the packing may stop changes nothing where it did not need
    // to: a packing within `enough` is the same either way.
    bool stopAlike =
        e.overMayStop == overMayStop || enough == 0 || e.arena <= enough;
    if (e.hash != hash || e.alignment != alignment || e.enough != enough ||
        e.sizeOrderLimit != sizeOrderLimit || !stopAlike ||
        e.buffers.size() != buffers.size())
      continue;
    bool same = true;
    for (size_t i = 0; same && i < buffers.size(); ++i)
      same = e.buffers[i].bytes == buffers[i].bytes &&
             e.buffers[i].start == buffers[i].start &&
             e.buffers[i].end == buffers[i].end;
    if (!same)
      continue;
    for (size_t i = 0; i < buffers.size(); ++i)
      buffers[i].offset = e.buffers[i].offset;
    uint64_t arena = e.arena;
    std::rotate(entries.begin(), entries.begin() + k, entries.begin() + k + 1);
    ++hits;
    return arena;
  }
  ++misses;
  uint64_t arena =
      placeBuffers(buffers, alignment, sizeOrderLimit, enough, overMayStop);
  if (entries.size() == kEntries)
    entries.pop_back();
  entries.insert(entries.begin(), Entry{hash, alignment, enough, arena,
                                        sizeOrderLimit, overMayStop, buffers});
  return arena;
}

} // namespace strata::arena
