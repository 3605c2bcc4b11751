// strata-iobench.cpp - Bandwidth of the SSD tier's I/O engine.
//
//   strata-iobench --dir DIR [--dir DIR2 ...] [--size 1GiB] [--block 1MiB]
//                  [--depth 32] [--engine io_uring|threads]
//                  [--unregistered] [--small-pages]
//                  [--jobs write,read,mixed]
//
// Writes, then reads, the store sequentially in blocks with `depth`
// requests in flight, O_DIRECT, from `depth` buffers of the runtime's own
// memory (artifact::AlignedBuffer) registered with the store as the
// runtime registers its arena, and
// prints MiB/s for each (the same job as fio --rw=write/read --bs=BLOCK
// --iodepth=DEPTH --direct=1). `mixed` writes the first half of the store
// while reading the second, from two threads, as the runtime's SSD read and
// write queues do, and prints the two directions' total MiB/s.
// bench/ssd_vs_fio.py compares these with fio's best configuration.

#include "runtime/artifact/Artifact.h"
#include "runtime/support/FileUtil.h"
#include "runtime/support/Size.h"
#include "runtime/tiers/SsdStore.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <vector>

using namespace strata;

int main(int argc, char **argv) {
  strata::ignoreFileSizeSignal();
  std::vector<std::string> dirs;
  uint64_t size = uint64_t(1) << 30, block = uint64_t(1) << 20;
  tiers::SsdOptions options;
  std::string jobs = "write,read";
  bool smallPages = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "strata-iobench: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    auto sizeValue = [&](uint64_t &out) {
      std::string v = value();
      if (!parseSize(v, out)) {
        std::fprintf(stderr, "strata-iobench: invalid size '%s'\n", v.c_str());
        std::exit(2);
      }
    };
    if (arg == "--dir")
      dirs.push_back(value());
    else if (arg == "--size")
      sizeValue(size);
    else if (arg == "--block")
      sizeValue(block);
    else if (arg == "--depth")
      options.queueDepth = static_cast<unsigned>(std::stoul(value()));
    else if (arg == "--engine")
      options.forceThreads = value() == "threads";
    else if (arg == "--unregistered")
      options.registered = false;
    else if (arg == "--jobs")
      jobs = value();
    else if (arg == "--small-pages")
      smallPages = true;
    else {
      std::fprintf(stderr,
                   "usage: strata-iobench --dir DIR [--dir DIR ...] [--size "
                   "1GiB] [--block 1MiB] [--depth 32] [--engine "
                   "io_uring|threads] [--unregistered] [--small-pages] "
                   "[--jobs write,read,mixed]\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  if (dirs.empty() || block == 0 || block % tiers::kIoAlignment ||
      size % (2 * block)) {
    std::fprintf(stderr, "strata-iobench: need --dir, and a block size (4 KiB "
                         "multiple) dividing half the size\n");
    return 2;
  }
  std::vector<std::string> jobList;
  std::stringstream list(jobs);
  for (std::string job; std::getline(list, job, ',');)
    jobList.push_back(job);
  for (const std::string &job : jobList)
    if (job != "write" && job != "read" && job != "mixed") {
      std::fprintf(stderr, "strata-iobench: unknown job '%s'\n", job.c_str());
      return 2;
    }
  options.stripeBytes = block;
  std::string error;
  auto store = tiers::SsdStore::open(dirs, size, options, error);
  if (!store) {
    std::fprintf(stderr, "strata-iobench: error: %s\n", error.c_str());
    return 1;
  }
  // `depth` buffers of the runtime's own memory (as its arena and staging
  // areas are allocated), registered as the runtime registers them.
  const uint64_t bufferBytes = block * options.queueDepth;
  artifact::AlignedBuffer buffers(smallPages ? 0 : bufferBytes);
  // --small-pages: 4 KiB pages, as fio's buffers are (fio cannot ask for
  // transparent huge pages), for a like-for-like comparison.
  std::unique_ptr<char, decltype(&std::free)> small(
      smallPages ? static_cast<char *>(
                       std::aligned_alloc(tiers::kIoAlignment, bufferBytes))
                 : nullptr,
      &std::free);
  if (small)
    ::madvise(small.get(), bufferBytes, MADV_NOHUGEPAGE);
  char *memory = smallPages ? small.get() : buffers.data();
  if (!memory || !buffers.valid()) {
    std::fprintf(stderr, "strata-iobench: error: out of memory\n");
    return 1;
  }
  // Random bytes, as fio writes: no drive or host may compress them.
  std::mt19937_64 rng(1);
  for (uint64_t i = 0; i + 8 <= bufferBytes; i += 8) {
    uint64_t v = rng();
    std::memcpy(memory + i, &v, 8);
  }
  tiers::SsdStore::Registration registration =
      store->registerMemory(memory, bufferBytes);
  // Requests for [from, to) of the store in one direction.
  auto requestsFor = [&](bool write, uint64_t from, uint64_t to) {
    std::vector<tiers::IoRequest> requests;
    for (uint64_t off = from; off < to; off += block)
      requests.push_back({write, off,
                          memory + (off / block) % options.queueDepth * block,
                          block});
    return requests;
  };
  std::printf("engine %s, %s, %zu drive(s), %s in %s blocks, depth %u, "
              "%s registered, %s\n",
              store->engineName(), store->direct() ? "O_DIRECT" : "buffered",
              dirs.size(), formatSize(size).c_str(), formatSize(block).c_str(),
              options.queueDepth, formatSize(store->fixedBytes()).c_str(),
              smallPages ? "4 KiB pages" : "huge pages advised");
  for (const std::string &job : jobList) {
    // Mixed: the write queue and the read queue at once, on two halves.
    bool mixed = job == "mixed";
    std::vector<tiers::IoRequest> first =
        requestsFor(job != "read", 0, mixed ? size / 2 : size);
    std::vector<tiers::IoRequest> second =
        mixed ? requestsFor(false, size / 2, size)
              : std::vector<tiers::IoRequest>();
    auto start = std::chrono::steady_clock::now();
    bool ok = true, otherOk = true;
    std::string otherError;
    std::thread reader;
    if (mixed)
      reader =
          std::thread([&] { otherOk = store->transfer(second, otherError); });
    ok = store->transfer(first, error);
    if (mixed)
      reader.join();
    if (ok && !otherOk) {
      ok = false;
      error = otherError;
    }
    if (!ok) {
      std::fprintf(stderr, "strata-iobench: error: %s\n", error.c_str());
      return 1;
    }
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    std::printf("%s %.1f MiB/s\n", job.c_str(), size / s / (1024.0 * 1024.0));
  }
  return 0;
}
