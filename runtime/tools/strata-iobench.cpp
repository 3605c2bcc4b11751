// strata-iobench.cpp - Bandwidth of the SSD tier's I/O engine.
//
//   strata-iobench --dir DIR [--dir DIR2 ...] [--size 1GiB] [--block 1MiB]
//                  [--depth 32] [--engine io_uring|threads]
//
// Writes, then reads, the store sequentially in blocks with `depth`
// requests in flight, O_DIRECT, through the registered staging buffers, and
// prints MiB/s for each (the same job as fio --rw=write/read --bs=BLOCK
// --iodepth=DEPTH --direct=1, for comparison: bench/ssd_vs_fio.sh).

#include "runtime/support/Size.h"
#include "runtime/tiers/SsdStore.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace strata;

int main(int argc, char **argv) {
  std::vector<std::string> dirs;
  uint64_t size = uint64_t(1) << 30, block = uint64_t(1) << 20;
  tiers::SsdOptions options;
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
    else {
      std::fprintf(stderr,
                   "usage: strata-iobench --dir DIR [--dir DIR ...] [--size "
                   "1GiB] [--block 1MiB] [--depth 32] [--engine "
                   "io_uring|threads]\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  if (dirs.empty() || block % tiers::kIoAlignment || size % block) {
    std::fprintf(stderr, "strata-iobench: need --dir, and a block size (4 KiB "
                         "multiple) dividing the size\n");
    return 2;
  }
  options.stagingBuffers = options.queueDepth;
  options.stagingBytes = block;
  options.stripeBytes = block;
  std::string error;
  auto store = tiers::SsdStore::open(dirs, size, options, error);
  if (!store) {
    std::fprintf(stderr, "strata-iobench: error: %s\n", error.c_str());
    return 1;
  }
  for (unsigned b = 0; b < store->stagingCount(); ++b)
    std::memset(store->stagingBuffer(b), static_cast<int>(b), block);
  std::vector<tiers::IoRequest> requests;
  for (uint64_t off = 0; off < size; off += block)
    requests.push_back(
        {false, off,
         store->stagingBuffer((off / block) % store->stagingCount()), block});
  std::printf("engine %s, %s, %zu drive(s), %s in %s blocks, depth %u\n",
              store->engineName(), store->direct() ? "O_DIRECT" : "buffered",
              dirs.size(), formatSize(size).c_str(), formatSize(block).c_str(),
              options.queueDepth);
  for (bool write : {true, false}) {
    for (auto &r : requests)
      r.write = write;
    auto start = std::chrono::steady_clock::now();
    if (!store->transfer(requests, error)) {
      std::fprintf(stderr, "strata-iobench: error: %s\n", error.c_str());
      return 1;
    }
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    std::printf("%s %.1f MiB/s\n", write ? "write" : "read",
                size / s / (1024.0 * 1024.0));
  }
  return 0;
}
