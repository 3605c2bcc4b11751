// Trainer.h - The training loop of strata-run.

#ifndef STRATA_RUNTIME_TRAIN_TRAINER_H
#define STRATA_RUNTIME_TRAIN_TRAINER_H

#include "runtime/exec/Executor.h"
#include "runtime/train/Session.h"

#include <string>
#include <utility>
#include <vector>

namespace strata::trainer {

struct TrainerOptions {
  /// Token data (.npy rows or .bin stream); empty when the plan's inputs
  /// are given as fixed arrays (`fixedInputs`).
  std::string dataPath;
  /// Labels for the rows of dataPath (DataSource::openLabels); empty: the
  /// tokens themselves.
  std::string labelsPath;
  /// Segment ids of packed rows (DataSource::openSegments), for a plan
  /// with position_ids and segment_ids inputs.
  std::string segmentsPath;
  /// Held-out rows (and their labels) for the held-out loss, every
  /// `evalEvery` steps (0: at the end only) and at the end.
  std::string evalData, evalLabels, evalSegments;
  int64_t evalEvery = 0;
  /// Keep the checkpoint of the lowest held-out loss in
  /// checkpointDir/best/ (with best.json saying its step and loss).
  bool keepBest = false;
  /// Total steps of the run (a resumed run continues up to this many).
  int64_t steps = 0;
  /// Instead of `steps`: this many passes over the data's rows (steps:
  /// epochs x rows / (batch x accumulate), rounded up).
  double epochs = 0;
  /// Shuffle the rows each epoch with this seed (DataSource::shuffle).
  bool shuffle = false;
  uint64_t shuffleSeed = 0;
  /// Save a checkpoint every this many steps (0: only at the end).
  int64_t saveEvery = 0;
  /// Keep each save's checkpoint as checkpointDir/step-N.bin too, the
  /// latest this many of them (0: only checkpoint.bin, the latest).
  int64_t keepLast = 0;
  /// False: save no checkpoint at all (benchmarks).
  bool checkpoints = true;
  std::string checkpointDir;
  bool resume = false;
  /// With `resume`: take up a checkpoint of another plan by tensor name.
  bool resumeByName = false;
  /// Append one JSON object per step here (empty: no log).
  std::string logJson;
  /// TensorBoard event files here (empty: none): EventFile.h.
  std::string tensorboardDir;
  bool quiet = false;
  std::vector<std::pair<std::string, npy::Array>> fixedInputs;
  /// Record the first `traceSteps` steps into `trace` (null: no trace).
  runtime::Trace *trace = nullptr;
  int64_t traceSteps = 2;
  /// What a non-finite loss or gradient norm does (see Session.h).
  using OnNan = trainer::OnNan;
  OnNan onNan = OnNan::Stop;
  /// The ranks of a data-parallel plan (null: this process alone): each
  /// trains on its slice of every global batch (rank r of N takes rows
  /// [r * B, (r + 1) * B) of the N * B rows), the loss logged is the global
  /// batch's, and rank 0 alone prints, logs and writes checkpoints.
  comm::Communicator *comm = nullptr;
};

/// Runs the training loop of a "train" plan. Returns false with `error` set;
/// the last checkpoint written stays valid whatever happens.
bool runTraining(artifact::Artifact &artifact, runtime::Executor &executor,
                 const TrainerOptions &options, std::string &error);

} // namespace strata::trainer

#endif // STRATA_RUNTIME_TRAIN_TRAINER_H
