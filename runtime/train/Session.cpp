// Session.cpp - One training run of an artifact, a step at a time.

#include "runtime/train/Session.h"
#include "runtime/support/FileUtil.h"
#include "runtime/train/Checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <unistd.h>

namespace strata::trainer {

using artifact::Binding;
using artifact::Plan;

namespace {

/// Removes the temporaries of saves that a crash or kill interrupted. Only
/// the holder of the checkpoint directory's lock writes there, so any
/// temporary found while holding it is stale.
void removeStaleTemporaries(const std::string &dir, const std::string &ckpt,
                            bool quiet) {
  std::string base = ckpt.substr(ckpt.find_last_of('/') + 1);
  std::string prefix = base + ".tmp.", shard = base + ".rank-";
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return;
  while (dirent *e = ::readdir(d)) {
    // Its own, and those of the ranks' shards (sharded optimizer state).
    std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0 &&
        (name.rfind(shard, 0) != 0 || name.find(".tmp.") == std::string::npos))
      continue;
    std::string path = dir + "/" + name;
    if (::unlink(path.c_str()) == 0 && !quiet)
      std::fprintf(stderr,
                   "strata-run: removed %s, left by an interrupted save\n",
                   path.c_str());
  }
  ::closedir(d);
}

/// Once the checkpoint `ckpt` (of `ranks` ranks' shards, or of one whole
/// optimizer: 1) is whole, the shard files beside it that it supersedes:
/// rank `rank`'s own but `keep`, and rank 0 removes those of ranks this
/// run does not have (an earlier run of more ranks). Interrupted saves'
/// temporaries are removeStaleTemporaries'.
void removeSupersededShards(const std::string &ckpt, int rank, int ranks,
                            const std::string &keep) {
  size_t slash = ckpt.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : ckpt.substr(0, slash);
  std::string base = ckpt.substr(slash == std::string::npos ? 0 : slash + 1);
  std::string kept = keep.substr(keep.find_last_of('/') + 1);
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return;
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(base + ".rank-", 0) != 0 ||
        name.find(".tmp.") != std::string::npos || name == kept)
      continue;
    int r = -1, of = 0;
    unsigned long long step = 0;
    char tail = 0;
    if (std::sscanf(name.c_str() + base.size(), ".rank-%d-of-%d.step-%llu%c",
                    &r, &of, &step, &tail) != 3)
      continue;
    if (r == rank || (rank == 0 && r >= ranks))
      ::unlink((dir + "/" + name).c_str());
  }
  ::closedir(d);
}

bool scalarOutput(runtime::Executor &executor, const std::string &name,
                  double &value) {
  npy::Array a;
  std::string ignored;
  if (!executor.getOutput(name, a, ignored) || a.dtype != DType::F32 ||
      a.data.size() != 4)
    return false;
  float f;
  std::memcpy(&f, a.data.data(), 4);
  value = f;
  return true;
}

} // namespace

std::string Session::checkpointFile() const {
  return checkpointPath(options_.checkpointDir);
}

Session::Session(artifact::Artifact &artifact, runtime::Executor &executor)
    : art_(artifact), executor_(executor) {
  const Plan &plan = art_.plan();
  // The causal-LM plan takes token ids and labels of the same shape; a
  // packed one (strata.hf.export(..., packing=True)) position and segment
  // ids of that shape too.
  const Binding *other = nullptr;
  size_t others = 0;
  for (const Binding &b : plan.inputs) {
    if (b.name == "labels")
      labels_ = &b;
    else if (b.name == "position_ids")
      positions_ = &b;
    else if (b.name == "segment_ids")
      segments_ = &b;
    else {
      other = &b;
      ++others;
    }
  }
  bool packed = positions_ && segments_;
  bool sameShapes =
      labels_ && std::all_of(plan.inputs.begin(), plan.inputs.end(),
                             [&](const Binding &b) {
                               return plan.slots[b.slot].shape ==
                                      plan.slots[labels_->slot].shape;
                             });
  if (sameShapes && others == 1 && plan.inputs.size() == (packed ? 4u : 2u))
    ids_ = other;
  else
    ids_ = labels_ = positions_ = segments_ = nullptr;
  for (const Binding &b : plan.outputs)
    lossScaling_ |= b.name == "loss_scale";
  for (const Binding &b : plan.outputs)
    if (b.name == "loss")
      for (size_t i = 0; i < plan.steps.size(); ++i)
        for (uint32_t o : plan.steps[i].outputs)
          if (o == b.slot)
            lossStep_ = static_cast<int64_t>(i);
  for (int64_t i = 0; i <= lossStep_; ++i)
    for (uint32_t w : plan.steps[i].waits)
      if (static_cast<int64_t>(w) > lossStep_)
        lossStep_ = -1;
}

std::string Session::checkpointState() const {
  std::string ckpt = checkpointFile();
  return pathExists(ckpt) ? "the last checkpoint, " + ckpt + ", is intact"
                          : std::string("no checkpoint was saved yet");
}

bool Session::open(const SessionOptions &options, std::string &error) {
  options_ = options;
  if (art_.plan().mode != "train") {
    error = "'" + art_.dir() +
            "' is a forward plan; training needs one "
            "compiled with --mode train";
    return false;
  }
  if (options.onNan == OnNan::Skip && !lossScaling_) {
    error = "--on-nan skip needs a plan compiled with --loss-scale (its "
            "updates are skipped when the gradients overflow); this plan "
            "applies every update, so a diverged step cannot be undone";
    return false;
  }
  // Every rank runs the same plan (their all-reduces must match).
  comm::Communicator *comm = options.comm;
  if (comm &&
      !comm->agree("plan (" + art_.dir() + ")", art_.plan().payloadCrc, error))
    return false;
  // One training job per artifact and per checkpoint directory: a second
  // one would overwrite the first one's checkpoints (and its SSD tensors,
  // which the SSD store's own locks also guard). Of a data-parallel job,
  // rank 0 holds them.
  bool lead = !comm || comm->rank() == 0;
  if (lead && !artifactLock_.lockDirectory(
                  art_.dir(), FileLock::Mode::Exclusive, "training it", error))
    return (error = "artifact " + error, false);
  if (!makeDirectories(options.checkpointDir, error))
    return false;
  if (lead && !checkpointLock_.lockDirectory(
                  options.checkpointDir, FileLock::Mode::Exclusive,
                  "writing checkpoints of " + art_.dir(), error))
    return (error = "checkpoint directory " + error, false);
  std::string ckpt = checkpointFile();
  if (lead)
    removeStaleTemporaries(options.checkpointDir, ckpt, options.quiet);
  if (options.resume && sharded() && !options.resumeByName) {
    if (!loadShards(ckpt, error))
      return false;
    if (!options.quiet)
      std::fprintf(stderr,
                   "strata-run: resumed from %s (and its %d ranks' shards) "
                   "at step %lld\n",
                   ckpt.c_str(), comm->size(),
                   static_cast<long long>(completed_));
  } else if (options.resume) {
    CheckpointInfo info;
    RemapSummary remap;
    // By name, a plan that shards its optimizer takes this rank's part of
    // each state, from a checkpoint of any number of ranks' shards.
    if (!loadCheckpoint(ckpt, art_, info, error, options.resumeByName, &remap,
                        comm ? comm->rank() : 0) ||
        !executor_.parametersToDevice(error))
      return false;
    completed_ = static_cast<int64_t>(info.step);
    if (!options.quiet && lead && remap.otherPlan) {
      std::fprintf(stderr,
                   "strata-run: %s is of another plan: took up %lld tensors "
                   "by name%s",
                   ckpt.c_str(), static_cast<long long>(remap.copied),
                   remap.narrowed ? " (made " : "");
      if (remap.narrowed)
        std::fprintf(stderr, "%lld low-precision copies from their masters)",
                     static_cast<long long>(remap.narrowed));
      if (remap.resharded)
        std::fprintf(stderr, ", its optimizer states re-sharded for %d rank%s",
                     comm ? comm->size() : 1,
                     comm && comm->size() > 1 ? "s" : "");
      if (!remap.unused.empty())
        std::fprintf(stderr,
                     "; %zu optimizer states of it are not in this plan "
                     "(first '%s')",
                     remap.unused.size(), remap.unused.front().c_str());
      std::fprintf(stderr, "\n");
    }
    if (!options.quiet)
      std::fprintf(stderr, "strata-run: resumed from %s at step %lld\n",
                   ckpt.c_str(), static_cast<long long>(completed_));
  }
  // Every rank continues from the same step.
  if (comm &&
      !comm->agree("resumed step", static_cast<uint64_t>(completed_), error))
    return false;
  return true;
}

bool Session::step(const std::function<bool(int64_t, std::string &)> &feed,
                   StepMetrics &metrics, std::string &error) {
  const Plan &plan = art_.plan();
  int64_t step = completed_;
  KernelContext context;
  context.step = step + 1;
  context.lrFactor = plan.schedule.factor(step + 1);
  auto start = std::chrono::steady_clock::now();
  metrics = StepMetrics();
  metrics.step = step + 1;
  double loss = 0;
  bool hasNorm = false;
  int64_t micro = plan.accumulate;
  // Micro-batch j of step k is batch k * micro + j of the data.
  for (int64_t j = 0; j < micro; ++j) {
    if (!feed(j, error))
      return false;
    context.applyUpdates = j + 1 == micro;
    if (!executor_.run(error, context)) {
      error = "training step " + std::to_string(step + 1) + ", plan " + error;
      return false;
    }
    double microLoss = NAN;
    scalarOutput(executor_, "loss", microLoss);
    loss += microLoss / static_cast<double>(micro);
    hasNorm |= scalarOutput(executor_, "grad_norm", metrics.gradNorm);
    scalarOutput(executor_, "loss_scale", metrics.lossScale);
  }
  // The global batch's loss: the mean of the ranks' (each of the same
  // number of rows). A rank's NaN makes every rank's mean NaN, so that all
  // of them stop at once.
  if (options_.comm && options_.comm->size() > 1) {
    if (!options_.comm->allReduceSum(&loss, 1, error)) {
      error = "training step " + std::to_string(step + 1) +
              ", averaging the loss: " + error;
      return false;
    }
    loss /= options_.comm->size();
  }
  metrics.loss = loss;
  // Divergence: with loss scaling, an overflowing step was skipped by the
  // plan itself; otherwise the update is in and must not be saved.
  bool lossDiverged = !std::isfinite(loss);
  bool normDiverged =
      hasNorm && !std::isfinite(metrics.gradNorm) && !lossScaling_;
  if ((lossDiverged || normDiverged) && options_.onNan == OnNan::Stop) {
    error = "training diverged at step " + std::to_string(step + 1) + ": " +
            (lossDiverged
                 ? "the loss is " + std::to_string(loss)
                 : "the gradient norm is " + std::to_string(metrics.gradNorm)) +
            "; stopped without saving this step (" + checkpointState() +
            "). Lower --lr, clip gradients (--clip-grad-norm), or compile "
            "with --loss-scale and run with --on-nan skip";
    return false;
  }
  metrics.skipped =
      !std::isnan(metrics.lossScale) && !std::isfinite(metrics.gradNorm);
  metrics.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  // The base rate of the first update kernel, for the log.
  for (const artifact::Step &s : plan.steps)
    if (artifact::isUpdateKernel(s.kernel) && !s.floats.empty()) {
      metrics.lr = s.floats[0] * context.lrFactor;
      break;
    }
  completed_ = step + 1;
  return true;
}

bool Session::evaluate(const std::function<bool(std::string &)> &feed,
                       double &loss, std::string &error) {
  if (lossStep_ < 0) {
    error = "this plan has no 'loss' output computed before its backward "
            "pass to evaluate";
    return false;
  }
  if (!feed(error))
    return false;
  KernelContext context;
  context.step = completed_ + 1;
  context.applyUpdates = false;
  if (!executor_.run(error, context, lossStep_)) {
    error = "evaluating after step " + std::to_string(completed_) + ", plan " +
            error;
    return false;
  }
  loss = NAN;
  scalarOutput(executor_, "loss", loss);
  return true;
}

bool Session::save(std::string &error) {
  return saveAs(checkpointFile(), error);
}

bool Session::sharded() const {
  return options_.comm && options_.comm->size() > 1 &&
         artifact::shardsOptimizer(art_.plan());
}

bool Session::ranksAgree(bool ok, const std::string &what, std::string &error) {
  comm::Communicator &comm = *options_.comm;
  std::vector<double> failed(static_cast<size_t>(comm.size()), 0.0);
  failed[static_cast<size_t>(comm.rank())] = ok ? 0.0 : 1.0;
  std::string commError;
  if (!comm.allReduceSum(failed.data(), comm.size(), commError)) {
    error = what + ": " + commError;
    return false;
  }
  if (!ok) {
    error = what + ": " + error;
    return false;
  }
  for (int r = 0; r < comm.size(); ++r)
    if (failed[static_cast<size_t>(r)] > 0) {
      error = what + ": rank " + std::to_string(r) +
              " failed (its own error says why)";
      return false;
    }
  return true;
}

bool Session::loadShards(const std::string &ckpt, std::string &error) {
  // Rank 0's file says the step; every other rank reads its own file of
  // that step. All ranks make the same collective calls, failing or not.
  comm::Communicator &comm = *options_.comm;
  CheckpointInfo info;
  bool ok = true;
  if (comm.rank() == 0)
    ok = loadCheckpoint(ckpt, art_, info, error, options_.resumeByName);
  if (!ranksAgree(ok, "reading " + ckpt, error))
    return false;
  double step = comm.rank() == 0 ? static_cast<double>(info.step) : 0.0;
  double ranks = comm.rank() == 0 ? info.shardRanks : 0;
  double both[2] = {step, ranks};
  if (!comm.allReduceSum(both, 2, error))
    return false;
  uint64_t at = static_cast<uint64_t>(both[0]);
  if (static_cast<int>(both[1]) != comm.size()) {
    error = ckpt + " holds the optimizer states of a run of " +
            std::to_string(static_cast<int>(both[1])) +
            " shards, this run "
            "has " +
            std::to_string(comm.size()) + " ranks";
    return false;
  }
  std::string mine = shardCheckpointPath(ckpt, comm.rank(), comm.size(), at);
  if (comm.rank() != 0) {
    ok = loadCheckpoint(mine, art_, info, error);
    if (ok && info.step != at) {
      error = "checkpoint '" + mine + "' is of step " +
              std::to_string(info.step) + ", not " + std::to_string(at);
      ok = false;
    }
    if (!ok && !pathExists(mine))
      error = "rank " + std::to_string(comm.rank()) +
              "'s shard of the "
              "checkpoint at step " +
              std::to_string(at) + " (" + mine +
              ") is missing: resume on the " + std::to_string(comm.size()) +
              " ranks, in the checkpoint directory, that wrote it";
  }
  ok = ok && executor_.parametersToDevice(error);
  if (!ranksAgree(ok, "resuming from the shards of " + ckpt, error))
    return false;
  completed_ = static_cast<int64_t>(at);
  return true;
}

bool Session::saveShards(const std::string &ckpt, std::string &error) {
  // Every rank but 0 writes its own file of this step beside the last
  // checkpoint's; rank 0's file (the one strata-export and a resume open
  // first) replaces the last one only once they all have: a save that
  // stops anywhere leaves the last checkpoint and its shards whole.
  comm::Communicator &comm = *options_.comm;
  CheckpointInfo info;
  info.planCrc = art_.plan().payloadCrc;
  info.step = static_cast<uint64_t>(completed_);
  info.shardRanks = static_cast<uint32_t>(comm.size());
  std::string mine =
      shardCheckpointPath(ckpt, comm.rank(), comm.size(), info.step);
  bool ok = executor_.parametersToHost(error);
  if (ok && comm.rank() != 0)
    ok = saveCheckpoint(mine, info, art_, error);
  if (!ranksAgree(ok, "writing the shards", error))
    return false;
  if (comm.rank() == 0)
    ok = saveCheckpoint(ckpt, info, art_, error);
  if (!ranksAgree(ok, "writing " + ckpt, error))
    return false;
  // The step's checkpoint is whole: the shards it supersedes go.
  removeSupersededShards(ckpt, comm.rank(), comm.size(), mine);
  return true;
}

bool Session::saveAs(const std::string &ckpt, std::string &error) {
  bool saved;
  if (sharded()) {
    saved = saveShards(ckpt, error);
  } else {
    // The ranks hold the same parameters and states: rank 0 writes them.
    if (options_.comm && options_.comm->rank() != 0)
      return true;
    CheckpointInfo info;
    info.planCrc = art_.plan().payloadCrc;
    info.step = static_cast<uint64_t>(completed_);
    saved = executor_.parametersToHost(error) &&
            saveCheckpoint(ckpt, info, art_, error);
    // A checkpoint of one whole optimizer supersedes any sharded one's
    // files beside it (a run resumed by name from one).
    if (saved)
      removeSupersededShards(ckpt, 0, 1, "");
  }
  if (!saved)
    error = "saving the checkpoint at step " + std::to_string(completed_) +
            " failed (" +
            (pathExists(ckpt) ? "the previous checkpoint is intact"
                              : std::string("there is no earlier "
                                            "checkpoint")) +
            "): " + error;
  return saved;
}

} // namespace strata::trainer
