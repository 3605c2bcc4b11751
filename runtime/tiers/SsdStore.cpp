// SsdStore.cpp - The SSD tier: striped files, io_uring or threads.

#include "runtime/tiers/SsdStore.h"
#include "runtime/support/Checked.h"
#include "runtime/support/Size.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <mutex>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <thread>
#include <unistd.h>

#ifdef STRATA_HAVE_LIBURING
#include <liburing.h>
#endif

namespace strata::tiers {

/// Runs the pieces of a transfer.
class IoEngine {
public:
  virtual ~IoEngine() = default;
  virtual const char *name() const = 0;
  virtual bool run(SsdStore &store, const std::vector<IoRequest> &requests,
                   const std::vector<SsdStore::Piece> &pieces,
                   std::string &error) = 0;
  /// Brings the engine's fixed buffers to `table` (a no-op where it has
  /// none, or they are current).
  virtual void refresh(const SsdStore::FixedTable &) {}
  /// Bytes the engine holds as fixed buffers.
  virtual uint64_t fixedBytes() const { return 0; }

protected:
  static std::string failure(const SsdStore &store, const SsdStore::Piece &p,
                             bool write, int err) {
    return std::string(write ? "write" : "read") + " of " +
           std::to_string(p.bytes) + " bytes at offset " +
           std::to_string(p.fileOffset) + " of '" + store.paths_[p.file] +
           "' failed: " + std::strerror(err) +
           (err == ENOSPC ? " (the drive is full)" : "");
  }
};

/// pread/pwrite on a pool of threads: the portable fallback.
class ThreadEngine : public IoEngine {
public:
  explicit ThreadEngine(unsigned threads) : threads_(std::max(1u, threads)) {}
  const char *name() const override { return "threads"; }

  bool run(SsdStore &store, const std::vector<IoRequest> &requests,
           const std::vector<SsdStore::Piece> &pieces,
           std::string &error) override {
    std::atomic<size_t> next{0};
    std::mutex errorMutex;
    std::string firstError;
    auto worker = [&] {
      while (true) {
        size_t i = next.fetch_add(1);
        if (i >= pieces.size())
          return;
        const SsdStore::Piece &p = pieces[i];
        const IoRequest &r = requests[p.request];
        char *buf = static_cast<char *>(r.buffer) + p.requestOffset;
        uint64_t done = 0;
        while (done < p.bytes) {
          ssize_t n = r.write ? ::pwrite(store.fds_[p.file], buf + done,
                                         p.bytes - done, p.fileOffset + done)
                              : ::pread(store.fds_[p.file], buf + done,
                                        p.bytes - done, p.fileOffset + done);
          if (n < 0 && errno == EINTR)
            continue;
          if (n <= 0) {
            std::lock_guard<std::mutex> lock(errorMutex);
            if (firstError.empty())
              firstError = failure(store, p, r.write, n < 0 ? errno : EIO);
            return;
          }
          done += static_cast<uint64_t>(n);
        }
      }
    };
    std::vector<std::thread> pool;
    unsigned count = std::min<size_t>(threads_, pieces.size());
    for (unsigned t = 1; t < count; ++t)
      pool.emplace_back(worker);
    worker();
    for (std::thread &t : pool)
      t.join();
    if (!firstError.empty()) {
      error = firstError;
      return false;
    }
    return true;
  }

private:
  unsigned threads_;
};

#ifdef STRATA_HAVE_LIBURING
/// io_uring with registered files and buffers, `depth` requests in flight.
class UringEngine : public IoEngine {
public:
  ~UringEngine() override {
    if (ready_)
      io_uring_queue_exit(&ring_);
  }
  const char *name() const override { return "io_uring"; }

  /// False (and no error) when the kernel refuses io_uring.
  bool init(SsdStore &store, unsigned depth) {
    depth_ = depth;
    if (io_uring_queue_init(depth, &ring_, 0) != 0)
      return false;
    ready_ = true;
    // Registered files: a request then skips the file table look-up and
    // reference counting.
    if (store.options_.registered)
      filesRegistered_ = io_uring_register_files(
                             &ring_, store.fds_.data(),
                             static_cast<unsigned>(store.fds_.size())) == 0;
    return true;
  }

  void refresh(const SsdStore::FixedTable &table) override {
    if (table == fixed_)
      return;
    if (buffersRegistered_)
      io_uring_unregister_buffers(&ring_);
    buffersRegistered_ = false;
    fixed_ = table;
    if (!fixed_ || fixed_->buffers.empty())
      return;
    std::vector<iovec> iov;
    for (const auto &[base, bytes] : fixed_->buffers)
      iov.push_back({base, bytes});
    // Refused (a memory-lock limit, too many buffers): requests take the
    // ordinary path.
    buffersRegistered_ =
        io_uring_register_buffers(&ring_, iov.data(),
                                  static_cast<unsigned>(iov.size())) == 0;
  }

  uint64_t fixedBytes() const override {
    uint64_t total = 0;
    if (buffersRegistered_)
      for (const auto &b : fixed_->buffers)
        total += b.second;
    return total;
  }

  bool run(SsdStore &store, const std::vector<IoRequest> &requests,
           const std::vector<SsdStore::Piece> &pieces,
           std::string &error) override {
    size_t next = 0, inFlight = 0, done = 0;
    // Remaining bytes per piece, for short transfers that must continue.
    std::vector<uint64_t> progress(pieces.size(), 0);
    auto queue = [&](size_t i) {
      const SsdStore::Piece &p = pieces[i];
      const IoRequest &r = requests[p.request];
      char *buf = static_cast<char *>(r.buffer) + p.requestOffset + progress[i];
      uint64_t bytes = p.bytes - progress[i];
      uint64_t offset = p.fileOffset + progress[i];
      io_uring_sqe *sqe = io_uring_get_sqe(&ring_);
      int index = buffersRegistered_ ? fixed_->find(buf, bytes) : -1;
      // With registered files the request names the file's index.
      int fd = filesRegistered_ ? p.file : store.fds_[p.file];
      if (index >= 0) {
        if (r.write)
          io_uring_prep_write_fixed(sqe, fd, buf, bytes, offset, index);
        else
          io_uring_prep_read_fixed(sqe, fd, buf, bytes, offset, index);
      } else if (r.write) {
        io_uring_prep_write(sqe, fd, buf, bytes, offset);
      } else {
        io_uring_prep_read(sqe, fd, buf, bytes, offset);
      }
      if (filesRegistered_)
        io_uring_sqe_set_flags(sqe, IOSQE_FIXED_FILE);
      io_uring_sqe_set_data64(sqe, i);
    };
    while (done < pieces.size()) {
      while (next < pieces.size() && inFlight < depth_) {
        queue(next++);
        ++inFlight;
      }
      int submitted = io_uring_submit(&ring_);
      if (submitted < 0) {
        error =
            std::string("io_uring submit failed: ") + std::strerror(-submitted);
        return false;
      }
      io_uring_cqe *cqe;
      int rc = io_uring_wait_cqe(&ring_, &cqe);
      if (rc < 0) {
        if (rc == -EINTR)
          continue;
        error = std::string("io_uring wait failed: ") + std::strerror(-rc);
        return false;
      }
      // Drain every completion that is ready.
      do {
        size_t i = io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&ring_, cqe);
        --inFlight;
        const SsdStore::Piece &p = pieces[i];
        if (res <= 0) {
          error = failure(store, p, requests[p.request].write,
                          res < 0 ? -res : EIO);
          // Let the requests in flight finish before returning.
          while (inFlight > 0 && io_uring_wait_cqe(&ring_, &cqe) == 0) {
            io_uring_cqe_seen(&ring_, cqe);
            --inFlight;
          }
          return false;
        }
        progress[i] += static_cast<uint64_t>(res);
        if (progress[i] < p.bytes) { // Short transfer: queue the rest.
          queue(i);
          ++inFlight;
        } else {
          ++done;
        }
      } while (io_uring_peek_cqe(&ring_, &cqe) == 0);
    }
    return true;
  }

private:
  io_uring ring_{};
  bool ready_ = false;
  bool filesRegistered_ = false;
  bool buffersRegistered_ = false;
  /// The table this ring was last brought to.
  SsdStore::FixedTable fixed_;
  unsigned depth_ = 32;
};
#endif

std::unique_ptr<SsdStore> SsdStore::open(const std::vector<std::string> &dirs,
                                         uint64_t capacity,
                                         const SsdOptions &options,
                                         std::string &error) {
  if (dirs.empty()) {
    error = "no SSD directory given (--ssd-dir DIR)";
    return nullptr;
  }
  if (options.stripeBytes % kIoAlignment != 0 || options.stripeBytes == 0) {
    error = "the stripe size must be a multiple of 4 KiB";
    return nullptr;
  }
  if (options.queueDepth == 0 || options.queueDepth > 4096) {
    error = "the SSD queue depth must be between 1 and 4096";
    return nullptr;
  }
  std::unique_ptr<SsdStore> store(new SsdStore());
  store->options_ = options;
  // Whole stripes on every drive.
  uint64_t stripes = (capacity + options.stripeBytes - 1) / options.stripeBytes;
  uint64_t perDrive = (stripes + dirs.size() - 1) / dirs.size();
  uint64_t fileBytes = perDrive * options.stripeBytes;
  store->capacity_ = fileBytes * dirs.size();
  std::vector<std::pair<dev_t, ino_t>> seen;
  for (size_t i = 0; i < dirs.size(); ++i) {
    // Create the directory (and its parents) when it is missing.
    std::error_code ec;
    std::filesystem::create_directories(dirs[i], ec);
    struct statvfs vfs;
    struct stat dirStat;
    if (::statvfs(dirs[i].c_str(), &vfs) != 0 ||
        ::stat(dirs[i].c_str(), &dirStat) != 0) {
      error = "SSD directory '" + dirs[i] + "': " + std::strerror(errno);
      return nullptr;
    }
    if (!S_ISDIR(dirStat.st_mode)) {
      error = "SSD directory '" + dirs[i] + "' is not a directory";
      return nullptr;
    }
    for (const auto &[dev, ino] : seen)
      if (dev == dirStat.st_dev && ino == dirStat.st_ino) {
        error = "SSD directory '" + dirs[i] + "' is given twice";
        return nullptr;
      }
    seen.emplace_back(dirStat.st_dev, dirStat.st_ino);
    FileLock lock;
    if (!lock.lockDirectory(dirs[i], FileLock::Mode::Exclusive, "its SSD store",
                            error)) {
      error = "SSD directory: " + error;
      return nullptr;
    }
    store->locks_.push_back(std::move(lock));
    std::string path = dirs[i] + "/strata-ssd-" + std::to_string(i) + ".bin";
    struct stat st;
    uint64_t existing = ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
    uint64_t available = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (fileBytes > existing && fileBytes - existing > available) {
      error = "SSD directory '" + dirs[i] + "' has " + formatSize(available) +
              " free; the plan needs " + formatSize(fileBytes - existing) +
              " more there";
      return nullptr;
    }
    int fd =
        ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_DIRECT, 0644);
    if (fd < 0 && errno == EINVAL) { // No O_DIRECT here (tmpfs).
      store->direct_ = false;
      fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    }
    if (fd < 0) {
      error = "cannot open '" + path + "': " + std::strerror(errno);
      return nullptr;
    }
    store->fds_.push_back(fd);
    store->paths_.push_back(path);
    int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(fileBytes));
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
      error = "cannot allocate " + formatSize(fileBytes) + " in '" + path +
              "': " + std::strerror(rc) +
              (rc == ENOSPC ? " (the drive is full)" : "");
      return nullptr;
    }
  }
  std::unique_ptr<IoEngine> first = store->makeEngine();
  store->engineName_ = first->name();
  store->idle_.push_back(std::move(first));
  return store;
}

std::unique_ptr<IoEngine> SsdStore::makeEngine() {
#ifdef STRATA_HAVE_LIBURING
  if (!options_.forceThreads) {
    auto uring = std::make_unique<UringEngine>();
    if (uring->init(*this, options_.queueDepth))
      return uring;
  }
#endif
  return std::make_unique<ThreadEngine>(options_.queueDepth);
}

SsdStore::~SsdStore() {
  idle_.clear();
  for (int fd : fds_)
    ::close(fd);
}

const char *SsdStore::engineName() const { return engineName_; }

int SsdStore::FixedBuffers::find(const char *p, uint64_t bytes) const {
  for (size_t i = 0; i < buffers.size(); ++i) {
    const auto &[base, size] = buffers[i];
    // The whole request must lie in one fixed buffer.
    if (p >= base && bytes <= size && p - base <= int64_t(size - bytes))
      return static_cast<int>(i);
  }
  return -1;
}

void SsdStore::Registration::reset() {
  if (store_)
    store_->unregisterMemory(id_);
  store_ = nullptr;
}

namespace {

/// The kernel's limit on one fixed buffer.
constexpr uint64_t kMaxFixedBuffer = uint64_t(1) << 30;

} // namespace

SsdStore::Registration SsdStore::registerMemory(void *base, uint64_t bytes) {
  return registerMemory({{base, bytes}});
}

SsdStore::Registration SsdStore::registerMemory(
    const std::vector<std::pair<void *, uint64_t>> &areas) {
  Registration handle;
  if (std::none_of(areas.begin(), areas.end(),
                   [](const auto &a) { return a.first && a.second > 0; }))
    return handle;
  handle.store_ = this;
  // One change for all of them: each change registers every region with
  // every ring again.
  changeRegions([&](std::vector<Region> &regions) {
    handle.id_ = nextRegionId_++;
    for (const auto &[base, bytes] : areas)
      if (base && bytes > 0)
        regions.push_back({handle.id_, static_cast<char *>(base), bytes});
  });
  return handle;
}

void SsdStore::unregisterMemory(uint64_t id) {
  changeRegions([&](std::vector<Region> &regions) {
    regions.erase(std::remove_if(regions.begin(), regions.end(),
                                 [&](const Region &r) { return r.id == id; }),
                  regions.end());
  });
}

void SsdStore::changeRegions(
    const std::function<void(std::vector<Region> &)> &change) {
  std::vector<std::unique_ptr<IoEngine>> engines;
  FixedTable table;
  {
    std::lock_guard<std::mutex> lock(engineMutex_);
    change(regions_);
    auto fixed = std::make_shared<FixedBuffers>();
    // Unregistered (--unregistered): an empty table, the ordinary path.
    if (options_.registered)
      for (const Region &r : regions_)
        for (uint64_t off = 0; off < r.bytes; off += kMaxFixedBuffer)
          fixed->buffers.emplace_back(r.base + off,
                                      std::min(kMaxFixedBuffer, r.bytes - off));
    fixed_ = table = std::move(fixed);
    engines.swap(idle_);
  }
  // The idle rings take the new table now: a new region is pinned before
  // the first transfer needs it, a removed one released before the caller
  // frees its memory. A ring busy meanwhile takes it when next used.
  for (auto &engine : engines)
    engine->refresh(table);
  std::lock_guard<std::mutex> lock(engineMutex_);
  for (auto &engine : engines)
    idle_.push_back(std::move(engine));
}

uint64_t SsdStore::fixedBytes() {
  std::lock_guard<std::mutex> lock(engineMutex_);
  return idle_.empty() ? 0 : idle_.front()->fixedBytes();
}

std::unique_ptr<IoEngine> SsdStore::takeEngine() {
  std::unique_ptr<IoEngine> engine;
  FixedTable table;
  {
    std::lock_guard<std::mutex> lock(engineMutex_);
    if (!idle_.empty()) {
      engine = std::move(idle_.back());
      idle_.pop_back();
    }
    table = fixed_; // A pointer: no copy of the table per transfer.
  }
  if (!engine)
    engine = makeEngine();
  engine->refresh(table);
  return engine;
}

bool SsdStore::split(const std::vector<IoRequest> &requests,
                     std::vector<Piece> &out, std::string &error) const {
  out.clear();
  for (size_t i = 0; i < requests.size(); ++i) {
    const IoRequest &r = requests[i];
    if (r.offset % kIoAlignment || r.bytes % kIoAlignment ||
        reinterpret_cast<uintptr_t>(r.buffer) % kIoAlignment) {
      error = "SSD request at offset " + std::to_string(r.offset) + " of " +
              std::to_string(r.bytes) +
              " bytes is not 4 KiB-aligned (offset, size and buffer)";
      return false;
    }
    if (r.offset > capacity_ || r.bytes > capacity_ - r.offset) {
      error = "SSD request at offset " + std::to_string(r.offset) + " of " +
              std::to_string(r.bytes) + " bytes is beyond the store's " +
              std::to_string(capacity_) + " bytes";
      return false;
    }
    uint64_t done = 0;
    while (done < r.bytes) {
      uint64_t logical = r.offset + done;
      uint64_t stripe = logical / options_.stripeBytes;
      uint64_t within = logical % options_.stripeBytes;
      uint64_t bytes = std::min(r.bytes - done, options_.stripeBytes - within);
      Piece p;
      p.file = static_cast<int>(stripe % fds_.size());
      p.fileOffset = (stripe / fds_.size()) * options_.stripeBytes + within;
      p.request = i;
      p.requestOffset = done;
      p.bytes = bytes;
      out.push_back(p);
      done += bytes;
    }
  }
  return true;
}

bool SsdStore::transfer(const std::vector<IoRequest> &requests,
                        std::string &error) {
  std::vector<Piece> pieces;
  if (!split(requests, pieces, error))
    return false;
  // Fault injection for the tests of failure handling: with
  // STRATA_SSD_FAIL_AFTER=N in the environment, every transfer after the
  // first N fails as a drive error would.
  static const long long failAfter = [] {
    const char *v = std::getenv("STRATA_SSD_FAIL_AFTER");
    int64_t n = -1;
    return v && parseInt64(v, n, 0) ? static_cast<long long>(n) : -1LL;
  }();
  static std::atomic<long long> transfers{0};
  if (failAfter >= 0 && transfers++ >= failAfter) {
    error = "transfer to '" + paths_[pieces.empty() ? 0 : pieces[0].file] +
            "' failed: Input/output error (injected by "
            "STRATA_SSD_FAIL_AFTER)";
    return false;
  }
  // An engine (a ring and its requests in flight) serves one caller at a
  // time; concurrent callers (the read and the write queue) each take one,
  // made on first need.
  std::unique_ptr<IoEngine> engine = takeEngine();
  bool ok = engine->run(*this, requests, pieces, error);
  std::lock_guard<std::mutex> lock(engineMutex_);
  idle_.push_back(std::move(engine));
  return ok;
}

bool SsdStore::write(uint64_t offset, const void *buffer, uint64_t bytes,
                     std::string &error) {
  return transfer({IoRequest{true, offset, const_cast<void *>(buffer), bytes}},
                  error);
}

bool SsdStore::read(uint64_t offset, void *buffer, uint64_t bytes,
                    std::string &error) {
  return transfer({IoRequest{false, offset, buffer, bytes}}, error);
}

} // namespace strata::tiers
