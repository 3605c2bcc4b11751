// Trainer.cpp - The training loop of strata-run.

#include "runtime/train/Trainer.h"
#include "runtime/support/FileUtil.h"
#include "runtime/support/Json.h"
#include "runtime/support/Size.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/DataSource.h"
#include "runtime/train/EventFile.h"
#include "runtime/train/Session.h"

#include <algorithm>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <unistd.h>

namespace strata::trainer {

using artifact::Binding;
using artifact::Plan;
using artifact::Slot;

namespace {

/// A number for the JSON log; JSON has no NaN or infinity: a diverged value
/// is null.
std::string number(double v) {
  char buf[32];
  if (!std::isfinite(v))
    return std::string("null");
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return std::string(buf);
}

/// --keep-last: the checkpoint just saved also as DIR/step-N.bin (a hard
/// link: no second copy; each save writes a new file, so the link keeps
/// this one), and of those up to `step` only the `keep` latest stay.
bool keepStepCheckpoint(const std::string &dir, const std::string &ckpt,
                        int64_t step, int64_t keep, std::string &error) {
  char name[40];
  std::snprintf(name, sizeof(name), "step-%08lld.bin",
                static_cast<long long>(step));
  std::string path = dir + "/" + name;
  if ((::unlink(path.c_str()) != 0 && errno != ENOENT) ||
      ::link(ckpt.c_str(), path.c_str()) != 0) {
    error = "cannot keep the checkpoint of step " + std::to_string(step) +
            " as " + path + " (--keep-last; a hard link to " + ckpt +
            "): " + std::strerror(errno);
    return false;
  }
  std::vector<std::pair<int64_t, std::string>> kept;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      long long n = -1;
      char tail = 0;
      if (std::sscanf(e->d_name, "step-%lld.bi%c", &n, &tail) == 2 &&
          tail == 'n' && std::strlen(e->d_name) == 17 && n >= 0 && n <= step)
        kept.emplace_back(n, dir + "/" + e->d_name);
    }
    ::closedir(d);
  }
  std::sort(kept.begin(), kept.end());
  for (size_t i = 0; i + keep < kept.size(); ++i)
    if (::unlink(kept[i].second.c_str()) != 0) {
      error = "cannot remove " + kept[i].second + " (--keep-last " +
              std::to_string(keep) + "): " + std::strerror(errno);
      return false;
    }
  return true;
}

std::string clock(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "--:--";
  long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, s / 60 % 60,
                  s % 60);
  else
    std::snprintf(buf, sizeof(buf), "%02ld:%02ld", s / 60, s % 60);
  return buf;
}

/// Packs token ids as the slot's integer type.
npy::Array tokens(const Slot &slot, const std::vector<int64_t> &values) {
  npy::Array a;
  a.dtype = slot.dtype;
  a.shape = slot.shape;
  a.data.resize(slot.bytes);
  for (size_t i = 0; i < values.size(); ++i) {
    if (slot.dtype == DType::I32) {
      int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(a.data.data() + 4 * i, &v, 4);
    } else {
      std::memcpy(a.data.data() + 8 * i, &values[i], 8);
    }
  }
  return a;
}

} // namespace

bool runTraining(artifact::Artifact &art, runtime::Executor &executor,
                 const TrainerOptions &given, std::string &error) {
  const Plan &plan = art.plan();
  // Data-parallel: rank 0 speaks, logs and saves for all; each rank reads
  // its slice of every global batch.
  comm::Communicator *comm = given.comm;
  int64_t ranks = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  bool lead = rank == 0;
  // Each rank holds its own shard of the optimizer states, and saves it.
  bool sharded = ranks > 1 && artifact::shardsOptimizer(plan);
  if (sharded && given.keepLast > 0) {
    error = "--keep-last keeps rank 0's file of each checkpoint only; a plan "
            "that shards its optimizer (--shard-optimizer) has one file a "
            "rank, so it cannot keep earlier checkpoints yet (drop "
            "--keep-last, or save to another --checkpoint-dir)";
    return false;
  }
  TrainerOptions options = given;
  if (!lead) {
    options.quiet = true;
    options.logJson.clear();
    options.tensorboardDir.clear();
    options.keepLast = 0;
  }
  if (options.steps <= 0 && !(options.epochs > 0)) {
    error = "a training plan needs --steps N or --epochs E (N, E > 0)";
    return false;
  }
  if (options.steps > 0 && options.epochs > 0) {
    error = "give --steps or --epochs, not both";
    return false;
  }
  if ((options.epochs > 0 || options.shuffle) && options.dataPath.empty()) {
    error = "--epochs and --shuffle go with --data";
    return false;
  }
  int64_t totalSteps = options.steps;
  Session session(art, executor);
  SessionOptions sessionOptions;
  sessionOptions.checkpointDir = options.checkpointDir;
  sessionOptions.resume = options.resume;
  sessionOptions.resumeByName = options.resumeByName;
  sessionOptions.quiet = options.quiet;
  sessionOptions.onNan = options.onNan;
  sessionOptions.comm = comm;
  // The inputs are checked before the session locks or resumes anything.
  const Binding *ids = session.idsInput(), *labels = session.labelsInput();
  const Binding *positions = session.positionsInput(),
                *segments = session.segmentsInput();
  if (ids && (positions != nullptr) != !options.segmentsPath.empty()) {
    error = positions ? "this plan packs examples (its inputs position_ids "
                        "and segment_ids): give --segments for --data"
                      : "--segments goes with a plan that packs examples "
                        "(strata.hf.export(..., packing=True))";
    return false;
  }
  if (positions && !options.evalData.empty() && options.evalSegments.empty()) {
    error = "this plan packs examples: give --eval-segments for --eval-data";
    return false;
  }
  DataSource data;
  if (!options.dataPath.empty()) {
    if (!ids) {
      error = "--data feeds training plans whose inputs are token ids and "
              "labels of the same shape (--loss causal-lm, or --loss output "
              "with a 'labels' input); give this plan's inputs with --input";
      return false;
    }
    const Slot &s = plan.slots[ids->slot];
    if (!data.open(options.dataPath, s.shape[0], s.shape[1], error))
      return false;
    if (!options.labelsPath.empty() &&
        !data.openLabels(options.labelsPath, error))
      return false;
    if (!options.segmentsPath.empty() &&
        !data.openSegments(options.segmentsPath, error))
      return false;
    if (options.shuffle)
      data.shuffle(options.shuffleSeed);
    if (options.epochs > 0) {
      double perStep = static_cast<double>(s.shape[0]) *
                       static_cast<double>(plan.accumulate) *
                       static_cast<double>(ranks);
      double steps = std::ceil(
          options.epochs * static_cast<double>(data.rows()) / perStep - 1e-9);
      if (!(steps >= 1) || steps > 1e15) {
        error = "--epochs " + std::to_string(options.epochs) + " of " +
                std::to_string(data.rows()) + " rows is no number of steps";
        return false;
      }
      totalSteps = static_cast<int64_t>(steps);
    }
  } else if (!options.labelsPath.empty()) {
    error = "--labels goes with --data (the labels of its rows)";
    return false;
  } else if (!options.evalData.empty()) {
    error = "--eval-data needs a plan trained with --data (token ids and "
            "labels)";
    return false;
  } else if (options.fixedInputs.size() != plan.inputs.size()) {
    error = "a training run needs --data FILE (token rows or stream) or one "
            "--input per plan input";
    return false;
  }
  DataSource evalData;
  if (options.evalData.empty() &&
      (!options.evalLabels.empty() || !options.evalSegments.empty() ||
       options.evalEvery > 0 || options.keepBest)) {
    error = "--eval-labels, --eval-segments, --eval-every and --keep-best "
            "need --eval-data";
    return false;
  }
  if (options.keepLast > 0 && !options.checkpoints) {
    error = "--keep-last keeps checkpoints; --no-checkpoint saves none";
    return false;
  }
  if (!options.evalData.empty()) {
    const Slot &s = plan.slots[ids->slot];
    if (!evalData.open(options.evalData, s.shape[0], s.shape[1], error) ||
        (!options.evalLabels.empty() &&
         !evalData.openLabels(options.evalLabels, error)) ||
        (!options.evalSegments.empty() &&
         !evalData.openSegments(options.evalSegments, error)))
      return false;
  }
  for (const auto &[name, array] : options.fixedInputs)
    if (!executor.setInput(name, array, error))
      return false;
  if (!session.open(sessionOptions, error))
    return false;
  // The best held-out loss so far (kept across --resume in best.json).
  std::string bestDir = options.checkpointDir + "/best";
  std::string bestJson = bestDir + "/best.json";
  double bestLoss = INFINITY;
  if (options.keepBest && options.resume) {
    std::string text;
    json::Value v;
    if (readRegularFile(bestJson, "best checkpoint record", 1 << 20, text,
                        error) &&
        json::parse(text, v, error))
      bestLoss = v.numberOr("eval_loss", INFINITY);
    error.clear();
  }
  std::string ckpt = session.checkpointFile();
  int64_t start = session.completedSteps();
  if (options.resume && start >= totalSteps) {
    std::fprintf(stderr,
                 "strata-run: the checkpoint is at step %lld; "
                 "nothing left to run for --steps %lld\n",
                 static_cast<long long>(start),
                 static_cast<long long>(totalSteps));
    return true;
  }

  FILE *log = nullptr;
  if (!options.logJson.empty()) {
    log = std::fopen(options.logJson.c_str(), options.resume ? "a" : "w");
    if (!log) {
      error = "cannot open --log-json file '" + options.logJson +
              "': " + std::strerror(errno);
      return false;
    }
  }
  EventFile events;
  if (!options.tensorboardDir.empty() &&
      !events.open(options.tensorboardDir, error)) {
    if (log)
      std::fclose(log);
    return false;
  }
  if (!options.quiet) {
    std::fprintf(stderr, "strata-run: training %s for %lld steps",
                 plan.optimizer.c_str(), static_cast<long long>(totalSteps));
    if (!options.dataPath.empty())
      std::fprintf(stderr, " on %s", data.description().c_str());
    std::fprintf(stderr, "\n");
  }

  // Of the global batch: every rank's.
  int64_t tokensPerStep =
      ids ? plan.slots[ids->slot].numElements() * plan.accumulate * ranks : 0;
  auto runStart = std::chrono::steady_clock::now();
  auto lastPrint = runStart - std::chrono::hours(1);
  std::vector<int64_t> in, lab;
  bool ok = true;
  int64_t micro = plan.accumulate;
  std::vector<double> stepTimes;
  std::vector<int64_t> seg, pos;
  auto setTokens = [&](std::string &err) {
    return executor.setInput(ids->name, tokens(plan.slots[ids->slot], in),
                             err) &&
           executor.setInput(labels->name,
                             tokens(plan.slots[labels->slot], lab), err) &&
           (!positions ||
            (executor.setInput(positions->name,
                               tokens(plan.slots[positions->slot], pos), err) &&
             executor.setInput(segments->name,
                               tokens(plan.slots[segments->slot], seg), err)));
  };
  auto feed = [&](int64_t step, int64_t j, std::string &err) {
    if (options.dataPath.empty())
      return true;
    // Micro-batch j of step k is global batch k * micro + j; of it, this
    // rank takes the rows of its place (the data's batch of that index
    // when batches are one rank's rows).
    data.batch((step * micro + j) * ranks + rank, in, lab,
               plan.labels != "same", &seg, &pos);
    // A mean over no label is NaN (as PyTorch's cross_entropy gives):
    // said for what it is, not as a diverged run.
    if (std::none_of(lab.begin(), lab.end(),
                     [](int64_t v) { return v >= 0; })) {
      err = "step " + std::to_string(step + 1) +
            (micro > 1 ? ", micro-batch " + std::to_string(j + 1) : "") +
            ": every label of its rows is ignored (negative), so its loss "
            "averages over nothing; drop rows whose labels are all -100 (or "
            "pack them with others)";
      return false;
    }
    return setTokens(err);
  };
  // The held-out loss: the mean over every kept label of the held-out rows
  // (each batch's mean weighted by its kept labels), as cross_entropy over
  // all of them at once.
  auto evaluate = [&](int64_t stepNumber) {
    auto t0 = std::chrono::steady_clock::now();
    double sum = 0;
    int64_t count = 0;
    for (int64_t k = 0; k < evalData.evalBatches(); ++k) {
      int64_t kept =
          evalData.evalBatch(k, in, lab, plan.labels != "same", &seg, &pos);
      if (kept == 0)
        continue;
      double loss = NAN;
      if (!session.evaluate(setTokens, loss, error))
        return false;
      sum += loss * static_cast<double>(kept);
      count += kept;
    }
    double mean = count ? sum / static_cast<double>(count) : NAN;
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (!options.quiet)
      std::fprintf(stderr,
                   "strata-run: step %lld: held-out loss %.4f, perplexity "
                   "%.3f over %lld tokens (%.2f s)\n",
                   static_cast<long long>(stepNumber), mean, std::exp(mean),
                   static_cast<long long>(count), seconds);
    if (log) {
      char buf[160];
      std::snprintf(buf, sizeof(buf),
                    "{\"step\": %lld, \"eval_loss\": %s, \"eval_ppl\": %s, "
                    "\"eval_tokens\": %lld, \"eval_s\": %.6f}\n",
                    static_cast<long long>(stepNumber), number(mean).c_str(),
                    number(std::exp(mean)).c_str(),
                    static_cast<long long>(count), seconds);
      if (std::fputs(buf, log) < 0 || std::fflush(log) != 0) {
        error = "cannot write --log-json file '" + options.logJson +
                "': " + std::strerror(errno);
        return false;
      }
    }
    if (events.isOpen() &&
        !events.scalars(
            stepNumber,
            {{"eval/loss", mean}, {"eval/perplexity", std::exp(mean)}}, error))
      return false;
    // Every rank has the same held-out loss (the same weights and rows).
    if (options.keepBest && (lead || sharded) && std::isfinite(mean) &&
        mean < bestLoss) {
      if (!makeDirectories(bestDir, error) ||
          !session.saveAs(checkpointPath(bestDir), error))
        return false;
      bestLoss = mean;
      if (!lead)
        return true;
      char exact[40];
      std::snprintf(exact, sizeof(exact), "%.17g", mean);
      std::string record = "{\"step\": " + std::to_string(stepNumber) +
                           ", \"eval_loss\": " + exact + "}\n";
      if (!writeFileAtomically(bestJson, record.data(), record.size(), error))
        return false;
      bestLoss = mean;
      if (!options.quiet)
        std::fprintf(stderr, "strata-run: best held-out loss so far -> %s\n",
                     checkpointPath(bestDir).c_str());
    }
    return true;
  };
  int64_t redoneSteps = 0, speculatedSteps = 0, clippedSteps = 0;
  for (int64_t step = start; step < totalSteps && ok; ++step) {
    executor.setTrace(options.trace && step - start < options.traceSteps
                          ? options.trace
                          : nullptr);
    StepMetrics m;
    int64_t redoneBefore = executor.redoneUpdates();
    if (!session.step(
            [&](int64_t j, std::string &err) { return feed(step, j, err); }, m,
            error)) {
      ok = false;
      break;
    }
    // Updates run speculatively during the backward pass and redone after
    // it because the step clipped (the session synchronised the step).
    int64_t redone = executor.redoneUpdates() - redoneBefore;
    redoneSteps += redone > 0;
    speculatedSteps += executor.lastRunSpeculated();
    clippedSteps += executor.lastRunClipped();
    auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - runStart).count();
    stepTimes.push_back(m.seconds);
    double tokensPerSecond = m.seconds > 0 ? tokensPerStep / m.seconds : 0.0;
    int64_t done = step + 1 - start;
    double eta = elapsed / done * (totalSteps - step - 1);
    if (log) {
      std::string extraFields =
          std::isnan(m.lossScale)
              ? ""
              : ", \"loss_scale\": " + number(m.lossScale) +
                    ", \"skipped\": " + (m.skipped ? "true" : "false");
      if (executor.speculates())
        extraFields += std::string(", \"speculated\": ") +
                       (executor.lastRunSpeculated() ? "true" : "false") +
                       ", \"redone_updates\": " + std::to_string(redone);
      // As the HuggingFace Trainer logs it: passes over the data so far.
      if (!options.dataPath.empty())
        extraFields +=
            ", \"epoch\": " +
            number(static_cast<double>(step + 1) *
                   static_cast<double>(tokensPerStep) /
                   static_cast<double>(data.rows() *
                                       plan.slots[ids->slot].shape[1]));
      std::fprintf(log,
                   "{\"step\": %lld, \"loss\": %s, \"lr\": %s, "
                   "\"grad_norm\": %s, \"tokens_per_s\": %.1f, "
                   "\"step_s\": %.6f%s}\n",
                   static_cast<long long>(step + 1), number(m.loss).c_str(),
                   number(m.lr).c_str(), number(m.gradNorm).c_str(),
                   tokensPerSecond, m.seconds, extraFields.c_str());
      if (std::fflush(log) != 0 || std::ferror(log)) {
        error = "cannot write --log-json file '" + options.logJson +
                "': " + std::strerror(errno) + "; stopped at step " +
                std::to_string(step + 1) + " (" + session.checkpointState() +
                ")";
        ok = false;
        break;
      }
    }
    if (events.isOpen()) {
      std::vector<std::pair<std::string, double>> values = {
          {"train/loss", m.loss},
          {"train/learning_rate", m.lr},
          {"train/tokens_per_s", tokensPerSecond},
          {"train/step_s", m.seconds}};
      if (!std::isnan(m.gradNorm))
        values.push_back({"train/grad_norm", m.gradNorm});
      if (!std::isnan(m.lossScale))
        values.push_back({"train/loss_scale", m.lossScale});
      if (!events.scalars(step + 1, values, error)) {
        error += "; stopped at step " + std::to_string(step + 1) + " (" +
                 session.checkpointState() + ")";
        ok = false;
        break;
      }
    }
    bool last = step + 1 == totalSteps;
    if (!options.quiet &&
        (last || step == start ||
         std::chrono::duration<double>(now - lastPrint).count() >= 1.0)) {
      std::fprintf(stderr,
                   "step %lld/%lld  loss %.4f  grad norm %.3f  lr %.2e  "
                   "%.0f tok/s  elapsed %s  eta %s\n",
                   static_cast<long long>(step + 1),
                   static_cast<long long>(totalSteps), m.loss, m.gradNorm, m.lr,
                   tokensPerSecond, clock(elapsed).c_str(), clock(eta).c_str());
      lastPrint = now;
    }
    if (m.skipped && !options.quiet)
      std::fprintf(stderr,
                   "strata-run: step %lld overflowed at loss scale %g: "
                   "skipped, scale halved\n",
                   static_cast<long long>(step + 1), m.lossScale);
    if (!options.evalData.empty() &&
        (last ||
         (options.evalEvery > 0 && (step + 1) % options.evalEvery == 0)) &&
        !evaluate(step + 1)) {
      ok = false;
      break;
    }
    if (options.checkpoints &&
        (last ||
         (options.saveEvery > 0 && (step + 1) % options.saveEvery == 0))) {
      if (!session.save(error) ||
          (options.keepLast > 0 &&
           !keepStepCheckpoint(options.checkpointDir, ckpt, step + 1,
                               options.keepLast, error))) {
        ok = false;
        break;
      }
      if (!options.quiet && !last)
        std::fprintf(stderr, "strata-run: checkpoint at step %lld -> %s\n",
                     static_cast<long long>(step + 1), ckpt.c_str());
    }
  }
  if (!events.close(error) && ok)
    ok = false;
  if (log && std::fclose(log) != 0 && ok) {
    error = "cannot write --log-json file '" + options.logJson +
            "': " + std::strerror(errno);
    ok = false;
  }
  executor.setTrace(nullptr);
  if (ok && !options.quiet) {
    std::fprintf(stderr, "strata-run: done; checkpoint %s\n",
                 options.checkpoints ? ckpt.c_str()
                                     : "not saved (--no-checkpoint)");
    std::vector<double> sorted = stepTimes;
    std::sort(sorted.begin(), sorted.end());
    const runtime::Executor::LinkBytes l = executor.linkBytes();
    double steps = std::max<size_t>(1, stepTimes.size());
    double predicted =
        plan.memoryOf(executor.overlapsTransfers() ? "predicted_step_us"
                                                   : "predicted_serial_us") *
        1e-6;
    double median = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
    if (predicted > 0)
      std::fprintf(stderr,
                   "strata-run: measured median step %.4f s, predicted "
                   "%.4f s (measured/predicted %.2f)\n",
                   median, predicted, median / predicted);
    if (executor.speculates())
      std::fprintf(stderr,
                   "strata-run: exact clipping: %lld of %zu steps clipped; "
                   "%lld ran their CPU updates during the backward pass as "
                   "if unclipped (every step but those after one that "
                   "clipped), %lld of them redone after it\n",
                   static_cast<long long>(clippedSteps), stepTimes.size(),
                   static_cast<long long>(speculatedSteps),
                   static_cast<long long>(redoneSteps));
    std::fprintf(stderr,
                 "strata-run: median step %.3f s; per step: host->device %s, "
                 "device->host %s, ssd->device %s, device->ssd %s\n",
                 sorted.empty() ? 0.0 : sorted[sorted.size() / 2],
                 formatSize(l.hostToDevice / steps).c_str(),
                 formatSize(l.deviceToHost / steps).c_str(),
                 formatSize(l.ssdToDevice / steps).c_str(),
                 formatSize(l.deviceToSsd / steps).c_str());
  }
  return ok;
}

} // namespace strata::trainer
