// SsdStore.h - The SSD tier: tensors in files on one or more drives.
//
// The store's address space is striped over one file per directory (drive),
// so several NVMe drives add up without RAID. All I/O is O_DIRECT with 4 KiB
// aligned offsets, sizes and buffers. The engine is io_uring (liburing) with
// registered buffers and many requests in flight; where io_uring is missing
// (not compiled in, or refused by the kernel) a pool of threads issues
// pread/pwrite instead. Free space is checked and the files are allocated up
// front, so a full disk is an error at open, not in the middle of a run.
//
// What the engine does to run at the drive's limit (bench/ssd_vs_fio.py
// compares it with fio's best configuration): the files are registered with
// each ring, and memory the caller registers (registerMemory: the runtime's
// arena and staging areas) is handed to the kernel once as fixed buffers,
// so a request costs no page pinning. Most of the rate comes from the
// memory itself: the runtime's buffers are on huge pages
// (artifact::AlignedBuffer), so a 1 MiB request is a few segments, not 256
// that the drive takes as two requests; on 4 KiB pages reads reach about
// half the rate on the development machine.

#ifndef STRATA_RUNTIME_TIERS_SSDSTORE_H
#define STRATA_RUNTIME_TIERS_SSDSTORE_H

#include "runtime/support/FileLock.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace strata::tiers {

constexpr uint64_t kIoAlignment = 4096;

/// The default stripe; the compiler's cost model splits SSD transfers at it.
constexpr uint64_t kDefaultStripeBytes = uint64_t(1) << 20;

struct SsdOptions {
  /// Bytes per stripe: consecutive stripes go to consecutive drives.
  uint64_t stripeBytes = kDefaultStripeBytes;
  /// Requests kept in flight.
  unsigned queueDepth = 32;
  /// Use the thread-pool engine even where io_uring works.
  bool forceThreads = false;
  /// Register the files and the caller's memory with each ring (off: the
  /// engine as it was before, for the benchmark's comparison).
  bool registered = true;
};

/// One transfer between memory and the store.
struct IoRequest {
  bool write = false;
  uint64_t offset = 0;
  void *buffer = nullptr;
  uint64_t bytes = 0;
};

class IoEngine;

class SsdStore {
public:
  /// Creates (or reuses) one file per directory and allocates `capacity`
  /// bytes in total (rounded up to whole stripes per drive). Fails with a
  /// message naming the directory when it is missing, not writable, lacks
  /// the free space, is given twice, or is in use by another process (each
  /// directory is locked while the store is open).
  static std::unique_ptr<SsdStore> open(const std::vector<std::string> &dirs,
                                        uint64_t capacity,
                                        const SsdOptions &options,
                                        std::string &error);
  ~SsdStore();

  /// Runs the requests with up to queueDepth in flight; returns when all
  /// are done. Offsets, sizes and buffers must be 4 KiB-aligned. An I/O
  /// error (ENOSPC, EIO, ...) is returned with the file and offset. Safe
  /// to call from several threads at once (each gets its own ring).
  bool transfer(const std::vector<IoRequest> &requests, std::string &error);

  bool write(uint64_t offset, const void *buffer, uint64_t bytes,
             std::string &error);
  bool read(uint64_t offset, void *buffer, uint64_t bytes, std::string &error);

  /// Memory handed to the kernel once (pinned) as fixed buffers of every
  /// ring, so requests into it skip the per-request page pinning. Held
  /// until the handle is destroyed, which must happen before the memory is
  /// freed (a fixed buffer keeps pointing at the pages it pinned). Where
  /// the kernel refuses (a memory-lock limit, no io_uring), requests into
  /// the region still work, through the ordinary path.
  class Registration {
  public:
    Registration() = default;
    ~Registration() { reset(); }
    Registration(Registration &&other) noexcept
        : store_(other.store_), id_(other.id_) {
      other.store_ = nullptr;
    }
    Registration &operator=(Registration &&other) noexcept {
      if (this != &other) {
        reset();
        store_ = other.store_;
        id_ = other.id_;
        other.store_ = nullptr;
      }
      return *this;
    }
    Registration(const Registration &) = delete;
    Registration &operator=(const Registration &) = delete;
    void reset();

  private:
    friend class SsdStore;
    SsdStore *store_ = nullptr;
    uint64_t id_ = 0;
  };
  Registration registerMemory(void *base, uint64_t bytes);
  /// Several areas (empty ones skipped) under one handle, registered and
  /// released in one change.
  Registration
  registerMemory(const std::vector<std::pair<void *, uint64_t>> &areas);
  /// Bytes of registered memory the rings hold as fixed buffers (0 where
  /// the kernel refused or the engine has none).
  uint64_t fixedBytes();

  uint64_t capacity() const { return capacity_; }
  /// "io_uring" or "threads".
  const char *engineName() const;
  /// Whether the files are open with O_DIRECT (false on file systems that
  /// refuse it, such as tmpfs).
  bool direct() const { return direct_; }

private:
  SsdStore() = default;
  struct Piece {
    int file;
    uint64_t fileOffset;
    size_t request;
    uint64_t requestOffset;
    uint64_t bytes;
  };
  bool split(const std::vector<IoRequest> &requests, std::vector<Piece> &out,
             std::string &error) const;
  /// A registered region, cut into the kernel's fixed buffers (at most
  /// 1 GiB each).
  struct Region {
    uint64_t id;
    char *base;
    uint64_t bytes;
  };
  /// The fixed buffers every ring registers, (base, bytes) each, in order.
  /// A snapshot is never changed: each (un)registration publishes a new
  /// one, so a ring knows it is current by comparing pointers.
  struct FixedBuffers {
    std::vector<std::pair<char *, uint64_t>> buffers;
    /// The fixed buffer holding [p, p + bytes), or -1.
    int find(const char *p, uint64_t bytes) const;
  };
  using FixedTable = std::shared_ptr<const FixedBuffers>;
  void unregisterMemory(uint64_t id);
  /// Applies `change` to the registered regions, publishes their fixed
  /// buffers and hands them to the idle rings.
  void changeRegions(const std::function<void(std::vector<Region> &)> &change);

  SsdOptions options_;
  std::vector<std::string> paths_;
  std::vector<int> fds_;
  /// One exclusive lock per directory, held while the store is open: two
  /// processes never share the same SSD files.
  std::vector<FileLock> locks_;
  uint64_t capacity_ = 0;
  bool direct_ = true;
  std::unique_ptr<IoEngine> makeEngine();
  /// An idle engine (made when none is), its fixed buffers brought up to
  /// date.
  std::unique_ptr<IoEngine> takeEngine();
  const char *engineName_ = "";
  /// Engines not in use by a transfer, the registered regions and their
  /// fixed buffers (all under engineMutex_; no table before the first
  /// registration).
  std::mutex engineMutex_;
  std::vector<std::unique_ptr<IoEngine>> idle_;
  std::vector<Region> regions_;
  FixedTable fixed_;
  uint64_t nextRegionId_ = 1;
  friend class IoEngine;
  friend class UringEngine;
  friend class ThreadEngine;
};

} // namespace strata::tiers

#endif // STRATA_RUNTIME_TIERS_SSDSTORE_H
