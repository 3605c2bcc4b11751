// HtmlReport.h - One self-contained page of what the compiler decided and
// how a run went (strata-inspect --html).
//
// The page has no script and loads nothing: every figure is inline SVG
// drawn here. It shows memory over the step on each tier stacked by tensor
// class (from the plan's steps and slot classes), the queues over the step
// as the compiler predicted them (the plan's predicted spans) and, given a
// trace from strata-run --trace, as one measured run of the plan, the
// placement by tier, the planner's choice against the naive plans, and the
// loss curve of a strata-run --log-json file.

#ifndef STRATA_RUNTIME_ARTIFACT_HTMLREPORT_H
#define STRATA_RUNTIME_ARTIFACT_HTMLREPORT_H

#include "runtime/artifact/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace strata::artifact {

/// One complete event ("ph": "X") of a strata-run --trace file.
struct TraceEvent {
  std::string name, category;
  /// runtime::Lane: 0 a run of the plan, 1 compute, 2 host copies, 3 SSD
  /// reads, 4 SSD writes, 5 CPU.
  int lane = 0;
  double startUs = 0, endUs = 0;
  /// The plan step it ran (-1: none, or a trace from before steps were
  /// recorded).
  int64_t step = -1;
};

/// Reads the complete events of a Chrome trace; false with `error` naming
/// the file and what is wrong. Events without a lane, a start or a
/// duration, or with a negative one, are refused.
bool readTrace(const std::string &path, std::vector<TraceEvent> &events,
               std::string &error);

/// One line of a strata-run --log-json file.
struct LogRow {
  int64_t step = 0;
  /// NaN where the log has null (a diverged step).
  double loss = 0;
  double stepSeconds = 0;
};

/// Reads a training log, one JSON object per line (blank lines skipped);
/// false with `error` naming the file and line.
bool readTrainingLog(const std::string &path, std::vector<LogRow> &rows,
                     std::string &error);

/// The tiers memory is drawn for.
enum class Tier { Device = 0, Host = 1, Ssd = 2 };
constexpr int kNumTiers = 3;

/// Bytes live on each tier over one run of the steps, by slot class, at
/// each position of the issue order (on the SSD, in whole pages). A stored
/// tensor (parameter, state, constant) is live throughout; any other is live
/// from the step that first writes it to the last that reads it (from the start
/// if read first: it carries over from the previous run; to the end if it is an
/// output). A slot no step writes that shares its bytes with one that is (an
/// exec.view) counts as that one.
struct MemoryOverStep {
  size_t positions = 0;
  /// live[tier][class][position].
  std::vector<uint64_t> live[kNumTiers][kNumSlotClasses];
  /// The tier's size in the plan: the device arena plus the parameter
  /// region, the host region, the SSD store.
  uint64_t capacity[kNumTiers] = {0, 0, 0};

  uint64_t total(Tier tier, size_t position) const;
  /// The most bytes live at once on the tier.
  uint64_t peak(Tier tier) const;
};

MemoryOverStep memoryOverStep(const Plan &plan);

/// What the page is drawn from besides the plan.
struct ReportInputs {
  /// Shown as the page's subject.
  std::string artifactPath;
  /// Optional: a trace and a training log, with the paths they came from.
  const std::vector<TraceEvent> *trace = nullptr;
  std::string tracePath;
  const std::vector<LogRow> *log = nullptr;
  std::string logPath;
};

/// The page, as one HTML document.
std::string htmlReport(const Plan &plan, const ReportInputs &inputs);

} // namespace strata::artifact

#endif // STRATA_RUNTIME_ARTIFACT_HTMLREPORT_H
