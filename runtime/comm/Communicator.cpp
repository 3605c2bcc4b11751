// Communicator.cpp - One process, or MPI's world.

#include "runtime/comm/Communicator.h"

#include "runtime/support/Half.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#ifdef STRATA_HAVE_MPI
// MPI's C interface only (not OpenMPI's deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace strata::comm {

namespace {

/// f32 values of `count` elements of a float `dtype` at `in`.
void widen(const void *in, DType dtype, int64_t count, float *out) {
  const auto *bits = static_cast<const uint16_t *>(in);
  if (dtype == DType::BF16)
    for (int64_t i = 0; i < count; ++i)
      out[i] = BFloat16::toFloat(bits[i]);
  else
    for (int64_t i = 0; i < count; ++i)
      out[i] = Half::toFloat(bits[i]);
}

bool reducible(DType dtype, std::string &error) {
  if (dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16 ||
      dtype == DType::F16)
    return true;
  error = std::string("all_reduce of ") + dtypeName(dtype) +
          " (only f32, f64, bf16 and f16 are averaged)";
  return false;
}

class SelfCommunicator final : public Communicator {
public:
  const char *name() const override { return "self"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  bool allReduceMean(const void *in, void *out, int64_t count, DType dtype,
                     std::string &error) override {
    if (!reducible(dtype, error))
      return false;
    if (in != out && count > 0)
      std::memmove(out, in, static_cast<size_t>(count) * dtypeSize(dtype));
    return true;
  }
  bool reduceScatterMean(const void *in, int64_t count, void *out,
                         int64_t chunk, DType dtype,
                         std::string &error) override {
    if (!reducible(dtype, error))
      return false;
    size_t size = dtypeSize(dtype);
    int64_t have = std::min(count, chunk);
    if (have > 0)
      std::memcpy(out, in, static_cast<size_t>(have) * size);
    if (chunk > have)
      std::memset(static_cast<char *>(out) + have * size, 0,
                  static_cast<size_t>(chunk - have) * size);
    return true;
  }
  bool allGather(const void *in, int64_t chunk, void *out, int64_t count,
                 DType dtype, std::string &) override {
    int64_t n = std::min(count, chunk);
    if (n > 0)
      std::memcpy(out, in, static_cast<size_t>(n) * dtypeSize(dtype));
    return true;
  }
  bool allReduceSum(double *, int64_t, std::string &) override { return true; }
  bool agree(const std::string &, uint64_t, std::string &) override {
    return true;
  }
  bool broadcast(void *, uint64_t, int, std::string &) override { return true; }
};

int envInt(const char *name) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return 0;
  char *end = nullptr;
  long n = std::strtol(v, &end, 10);
  return *end == '\0' && n > 0 && n <= INT_MAX ? static_cast<int>(n) : 0;
}

#ifdef STRATA_HAVE_MPI
std::string mpiError(const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    length = 0;
  return std::string(what) + ": " + std::string(text, length);
}

class MpiCommunicator final : public Communicator {
public:
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!ownsMpi_ || finalized)
      return;
    // A collective that failed or timed out may still be pending, and
    // the other ranks may wait in one: end the whole job rather than hang
    // in MPI_Finalize.
    if (broken_)
      MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
  }

  bool start(std::string &error) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      // One thread calls at a time (see Communicator.h), not always the
      // same one: the queue's thread runs the collectives.
      int provided = 0;
      int rc =
          MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      if (rc != MPI_SUCCESS) {
        error = "MPI did not start (MPI_Init_thread failed)";
        return false;
      }
      ownsMpi_ = true;
      if (provided < MPI_THREAD_SERIALIZED) {
        error = "this MPI does not allow calls from more than one thread "
                "(MPI_THREAD_SERIALIZED), which the communication queue "
                "needs";
        return false;
      }
    }
    // Errors come back as codes (and become messages) where MPI can
    // return at all; a rank that dies still ends the job through mpirun.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // How long a collective waits for the other ranks before this one
    // gives up: a rank that hangs (or died without mpirun noticing) then
    // stops the job instead of holding it forever.
    if (const char *t = std::getenv("STRATA_COMM_TIMEOUT")) {
      char *end = nullptr;
      double s = std::strtod(t, &end);
      if (end == t || *end != '\0' || !(s > 0) || s > 1e9) {
        error = std::string("STRATA_COMM_TIMEOUT must be a positive number "
                            "of seconds, not '") +
                t + "'";
        return false;
      }
      timeoutSeconds_ = s;
    }
    return true;
  }

  const char *name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  bool allReduceMean(const void *in, void *out, int64_t count, DType dtype,
                     std::string &error) override {
    if (!reducible(dtype, error))
      return false;
    if (count <= 0)
      return true;
    if (dtype == DType::F32 || dtype == DType::F64) {
      if (!sum(in, out, count, dtype == DType::F32 ? MPI_FLOAT : MPI_DOUBLE,
               dtypeSize(dtype), error))
        return false;
      if (dtype == DType::F32) {
        auto *f = static_cast<float *>(out);
        float n = static_cast<float>(size_);
        for (int64_t i = 0; i < count; ++i)
          f[i] /= n;
      } else {
        auto *d = static_cast<double *>(out);
        for (int64_t i = 0; i < count; ++i)
          d[i] /= size_;
      }
      return true;
    }
    std::vector<float> wide(static_cast<size_t>(count));
    widen(in, dtype, count, wide.data());
    if (!sum(wide.data(), wide.data(), count, MPI_FLOAT, 4, error))
      return false;
    float n = static_cast<float>(size_);
    for (float &v : wide)
      v /= n;
    narrowFloats(wide.data(), static_cast<uint16_t *>(out), count,
                 dtype == DType::BF16);
    return true;
  }

  bool allReduceSum(double *values, int64_t count,
                    std::string &error) override {
    return count <= 0 || sum(values, values, count, MPI_DOUBLE, 8, error);
  }

  bool reduceScatterMean(const void *in, int64_t count, void *out,
                         int64_t chunk, DType dtype,
                         std::string &error) override {
    if (!reducible(dtype, error))
      return false;
    if (chunk <= 0)
      return true;
    if (count < 0 || count > chunk * size_) {
      error = "reduce_scatter of " + std::to_string(count) +
              " elements in shards of " + std::to_string(chunk);
      return false;
    }
    // f32 and f64 are summed in their own type, bf16 and f16 in f32.
    bool narrow = dtype == DType::BF16 || dtype == DType::F16;
    size_t size = narrow ? 4 : dtypeSize(dtype);
    MPI_Datatype type = dtype == DType::F64 ? MPI_DOUBLE : MPI_FLOAT;
    int64_t total = chunk * size_;
    // The padded input, in the type summed.
    const char *src = static_cast<const char *>(in);
    if (narrow || count != total) {
      scratch_.resize(static_cast<size_t>(total) * size);
      if (narrow)
        widen(in, dtype, count, reinterpret_cast<float *>(scratch_.data()));
      else if (count > 0)
        std::memcpy(scratch_.data(), in, static_cast<size_t>(count) * size);
      std::memset(scratch_.data() + count * size, 0,
                  static_cast<size_t>(total - count) * size);
      src = scratch_.data();
    }
    std::vector<char> wide;
    char *dst = static_cast<char *>(out);
    if (narrow) {
      wide.resize(static_cast<size_t>(chunk) * size);
      dst = wide.data();
    }
    constexpr int64_t kPiece = int64_t(1) << 30;
    if (chunk <= kPiece) {
      MPI_Request request;
      int rc =
          MPI_Ireduce_scatter_block(src, dst, static_cast<int>(chunk), type,
                                    MPI_SUM, MPI_COMM_WORLD, &request);
      if (!complete("MPI_Ireduce_scatter_block", rc, request, error))
        return false;
    } else {
      // A shard of more elements than MPI's int counts: the whole sum
      // (in pieces), of which this rank keeps its shard.
      if (src != scratch_.data()) {
        scratch_.assign(src, src + total * size);
        src = scratch_.data();
      }
      if (!sum(scratch_.data(), scratch_.data(), total, type, size, error))
        return false;
      std::memcpy(dst, scratch_.data() + rank_ * chunk * size,
                  static_cast<size_t>(chunk) * size);
    }
    if (dtype == DType::F64) {
      auto *d = reinterpret_cast<double *>(dst);
      for (int64_t i = 0; i < chunk; ++i)
        d[i] /= size_;
      return true;
    }
    auto *f = reinterpret_cast<float *>(dst);
    float n = static_cast<float>(size_);
    for (int64_t i = 0; i < chunk; ++i)
      f[i] /= n;
    if (narrow)
      narrowFloats(f, static_cast<uint16_t *>(out), chunk,
                   dtype == DType::BF16);
    return true;
  }

  bool allGather(const void *in, int64_t chunk, void *out, int64_t count,
                 DType dtype, std::string &error) override {
    if (chunk <= 0)
      return true;
    int64_t total = chunk * size_;
    if (count < 0 || count > total) {
      error = "all_gather of " + std::to_string(count) +
              " elements from shards of " + std::to_string(chunk);
      return false;
    }
    uint64_t bytes = static_cast<uint64_t>(chunk) * dtypeSize(dtype);
    char *all = static_cast<char *>(out);
    if (count != total) {
      scratch_.resize(static_cast<size_t>(total) * dtypeSize(dtype));
      all = scratch_.data();
    }
    if (bytes <= static_cast<uint64_t>(INT_MAX)) {
      MPI_Request request;
      int n = static_cast<int>(bytes);
      int rc = MPI_Iallgather(in, n, MPI_BYTE, all, n, MPI_BYTE, MPI_COMM_WORLD,
                              &request);
      if (!complete("MPI_Iallgather", rc, request, error))
        return false;
    } else {
      // Shards past MPI's int byte counts: each rank's in turn, in pieces.
      std::memcpy(all + rank_ * bytes, in, bytes);
      for (int r = 0; r < size_; ++r)
        if (!broadcast(all + r * bytes, bytes, r, error))
          return false;
    }
    if (all != out)
      std::memcpy(out, all, static_cast<size_t>(count) * dtypeSize(dtype));
    return true;
  }

  bool agree(const std::string &what, uint64_t value,
             std::string &error) override {
    std::vector<unsigned long long> all(static_cast<size_t>(size_));
    unsigned long long mine = value;
    MPI_Request request;
    int rc = MPI_Iallgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all.data(), 1,
                            MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD, &request);
    if (!complete("MPI_Iallgather", rc, request, error)) {
      error = "comparing " + what + " across the ranks: " + error;
      return false;
    }
    for (int r = 1; r < size_; ++r)
      if (all[r] != all[0]) {
        error = "rank " + std::to_string(r) + " has another " + what +
                " than rank 0 (" + std::to_string(all[r]) + " against " +
                std::to_string(all[0]) + ")";
        return false;
      }
    return true;
  }

  bool broadcast(void *data, uint64_t bytes, int root,
                 std::string &error) override {
    constexpr uint64_t kPiece = uint64_t(1) << 30;
    for (uint64_t at = 0; at < bytes; at += kPiece) {
      MPI_Request request;
      int n = static_cast<int>(std::min(kPiece, bytes - at));
      int rc = MPI_Ibcast(static_cast<char *>(data) + at, n, MPI_BYTE, root,
                          MPI_COMM_WORLD, &request);
      if (!complete("MPI_Ibcast", rc, request, error))
        return false;
    }
    return true;
  }

private:
  /// Sums over the ranks into `out`, in pieces whose element counts fit
  /// MPI's int.
  bool sum(const void *in, void *out, int64_t count, MPI_Datatype type,
           size_t elementBytes, std::string &error) {
    constexpr int64_t kPiece = int64_t(1) << 30;
    for (int64_t at = 0; at < count; at += kPiece) {
      int n = static_cast<int>(std::min(kPiece, count - at));
      char *o = static_cast<char *>(out) + at * elementBytes;
      const void *i = in == out
                          ? MPI_IN_PLACE
                          : static_cast<const char *>(in) + at * elementBytes;
      MPI_Request request;
      int rc = MPI_Iallreduce(i, o, n, type, MPI_SUM, MPI_COMM_WORLD, &request);
      if (!complete("MPI_Iallreduce", rc, request, error))
        return false;
    }
    return true;
  }

  /// A non-blocking collective `call` started with `rc`, waited for: false
  /// with `error` (and the communicator broken) when it did not start or
  /// did not finish in time.
  bool complete(const char *call, int rc, MPI_Request &request,
                std::string &error) {
    if (rc != MPI_SUCCESS)
      error = mpiError(call, rc);
    else if (finish(request, rc, error))
      return true;
    broken_ = true;
    return false;
  }

  /// Waits for `request` until the timeout: polls, sleeping a little
  /// between polls once the first millisecond has passed.
  bool finish(MPI_Request &request, int &rc, std::string &error) {
    using Clock = std::chrono::steady_clock;
    auto start = Clock::now();
    for (int polls = 0;; ++polls) {
      int done = 0;
      rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) {
        error = mpiError("MPI_Test", rc);
        return false;
      }
      if (done)
        return true;
      double waited =
          std::chrono::duration<double>(Clock::now() - start).count();
      if (waited > timeoutSeconds_) {
        error = "rank " + std::to_string(rank_) + " waited " +
                std::to_string(static_cast<int64_t>(waited)) +
                " s for the other ranks (STRATA_COMM_TIMEOUT): one of them "
                "stopped answering (hung, or died)";
        return false;
      }
      if (waited > 1e-3)
        std::this_thread::sleep_for(
            std::chrono::microseconds(std::min(1000, 20 * (polls + 1))));
    }
  }

  int rank_ = 0, size_ = 1;
  bool ownsMpi_ = false, broken_ = false;
  /// Padded inputs and gathered outputs that are not the caller's buffers.
  std::vector<char> scratch_;
  double timeoutSeconds_ = 600;
};
#endif

} // namespace

std::unique_ptr<Communicator> selfCommunicator() {
  return std::make_unique<SelfCommunicator>();
}

int launchedWorldSize() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (int n = envInt(name))
      return n;
  return 1;
}

bool haveMpi() {
#ifdef STRATA_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> worldCommunicator(std::string &error) {
  const char *launcher = std::getenv("OMPI_COMM_WORLD_SIZE") ? "mpirun"
                         : std::getenv("PMI_SIZE")           ? "PMI"
                         : std::getenv("PMIX_SIZE")          ? "PMIx"
                                                             : nullptr;
  if (!launcher) {
    // torchrun and torch.distributed's other launchers give each process
    // WORLD_SIZE and RANK and a rendezvous of their own, which Strata does
    // not speak: each such process would train alone, on every row.
    if (int n = envInt("WORLD_SIZE"); n > 1) {
      error = "WORLD_SIZE=" + std::to_string(n) +
              " is set (a torchrun-style launch), but no MPI launcher "
              "started this process: Strata's ranks find each other "
              "through MPI. Launch them with mpirun -np " +
              std::to_string(n) +
              " (or unset WORLD_SIZE to train in one process)";
      return nullptr;
    }
    return selfCommunicator();
  }
#ifdef STRATA_HAVE_MPI
  auto mpi = std::make_unique<MpiCommunicator>();
  if (!mpi->start(error))
    return nullptr;
  return mpi;
#else
  if (launchedWorldSize() > 1) {
    error = std::string("started by ") + launcher + " as one of " +
            std::to_string(launchedWorldSize()) +
            " processes, but this build has no MPI (install libopenmpi-dev: "
            "scripts/install-deps.sh, then rebuild)";
    return nullptr;
  }
  return selfCommunicator();
#endif
}

} // namespace strata::comm
