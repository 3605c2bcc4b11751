// Session.h - One training run of an artifact, a step at a time.
//
// strata-run's loop (Trainer.cpp) and the Python bindings both drive
// training through a Session, so a step computes the same bits whichever
// feeds it: the session holds the locks (one training job per artifact and
// per checkpoint directory), resumes from the checkpoint, runs a step's
// micro-batches with the step's learning-rate factor, refuses a diverged
// step, and saves checkpoints atomically.

#ifndef STRATA_RUNTIME_TRAIN_SESSION_H
#define STRATA_RUNTIME_TRAIN_SESSION_H

#include "runtime/exec/Executor.h"
#include "runtime/support/FileLock.h"

#include <cmath>
#include <functional>
#include <string>

namespace strata::trainer {

/// What a non-finite loss or gradient norm does. Stop (default): the step
/// is an error and nothing of it is saved (the last checkpoint stays).
/// Skip: the step counts as skipped and the run goes on; only for plans
/// compiled with loss scaling, whose updates are skipped on overflow (other
/// plans have applied the update by the time it shows).
enum class OnNan { Stop, Skip };

struct SessionOptions {
  /// Where checkpoints go (created if missing).
  std::string checkpointDir;
  /// Continue from the checkpoint in checkpointDir.
  bool resume = false;
  /// With `resume`: a checkpoint of another plan of the same model is taken
  /// up by tensor name (loadCheckpoint's byName).
  bool resumeByName = false;
  bool quiet = false;
  OnNan onNan = OnNan::Stop;
  /// Data-parallel training: the ranks (null: this process alone). The
  /// loss is averaged over them; rank 0 holds the locks and writes the
  /// checkpoints (the ranks' parameters and states are the same), the
  /// others only read one to resume. A plan that shards its optimizer
  /// (--shard-optimizer) has each rank write and read its own file
  /// (shardCheckpointPath), rank 0's last.
  comm::Communicator *comm = nullptr;
};

/// What one step measured.
struct StepMetrics {
  /// The step's number, from 1.
  int64_t step = 0;
  /// Mean over the step's micro-batches (and the data-parallel ranks).
  double loss = NAN;
  /// Before clipping; NaN when the plan computes none.
  double gradNorm = NAN;
  /// NaN without loss scaling.
  double lossScale = NAN;
  /// The base rate of the first update, times the schedule's factor.
  double lr = 0;
  double seconds = 0;
  /// Loss scaling skipped this step's update (the gradients overflowed).
  bool skipped = false;
};

class Session {
public:
  Session(artifact::Artifact &artifact, runtime::Executor &executor);

  /// Locks the artifact and the checkpoint directory, removes temporaries
  /// of interrupted saves, and with `resume` loads the checkpoint.
  bool open(const SessionOptions &options, std::string &error);

  /// Steps completed (counting those before a resume).
  int64_t completedSteps() const { return completed_; }
  /// Whether the plan uses loss scaling.
  bool lossScaling() const { return lossScaling_; }
  /// The plan's token-id and label inputs, when those are its two inputs
  /// (a causal-LM plan, or --loss output with a 'labels' input); null
  /// otherwise.
  const artifact::Binding *idsInput() const { return ids_; }
  const artifact::Binding *labelsInput() const { return labels_; }
  /// A packed plan's position and segment ids (both, or null).
  const artifact::Binding *positionsInput() const { return positions_; }
  const artifact::Binding *segmentsInput() const { return segments_; }
  std::string checkpointFile() const;
  /// For messages about a stopped run: "the last checkpoint, FILE, is
  /// intact" or "no checkpoint was saved yet".
  std::string checkpointState() const;

  /// Runs the next step: `feed(j, error)` sets the inputs of micro-batch j
  /// (0 .. accumulate-1) before it runs (inputs it leaves keep their last
  /// values). A diverged step is an error under OnNan::Stop.
  bool step(const std::function<bool(int64_t, std::string &)> &feed,
            StepMetrics &metrics, std::string &error);

  /// The held-out loss of one batch at the current weights: `feed(error)`
  /// sets the inputs, then only the plan's forward pass runs (up to the
  /// loss: nothing is updated or accumulated, the step count stays).
  /// False with `error` for a plan without a loss output.
  bool evaluate(const std::function<bool(std::string &)> &feed, double &loss,
                std::string &error);
  /// Saves the completed steps' state atomically (the previous checkpoint
  /// stays intact if this fails).
  bool save(std::string &error);
  /// The same into another checkpoint file (the best held-out loss's).
  bool saveAs(const std::string &path, std::string &error);

private:
  /// Whether each rank holds its own shard of the optimizer states
  /// (--shard-optimizer over several ranks): each writes its own file.
  bool sharded() const;
  /// Whether `ok` holds on every rank (a collective: every rank calls it);
  /// false with an error naming `what` and the first rank that failed.
  bool ranksAgree(bool ok, const std::string &what, std::string &error);
  bool saveShards(const std::string &ckpt, std::string &error);
  bool loadShards(const std::string &ckpt, std::string &error);

  artifact::Artifact &art_;
  runtime::Executor &executor_;
  SessionOptions options_;
  FileLock artifactLock_, checkpointLock_;
  const artifact::Binding *ids_ = nullptr, *labels_ = nullptr;
  const artifact::Binding *positions_ = nullptr, *segments_ = nullptr;
  bool lossScaling_ = false;
  /// The last step writing the loss; -1 when the plan has none, or when a
  /// step before it waits for one after (no forward pass alone to run).
  int64_t lossStep_ = -1;
  int64_t completed_ = 0;
};

} // namespace strata::trainer

#endif // STRATA_RUNTIME_TRAIN_SESSION_H
