// fuzz-report.cpp - libFuzzer target: the readers of strata-inspect --html's
// inputs (a Chrome trace, a JSON-lines training log) and the page drawn
// from what they accept. The first byte picks the reader; the rest is the
// file.

#include "runtime/artifact/HtmlReport.h"
#include "runtime/artifact/StepOrder.h"
#include "test/fuzz/FuzzInput.h"

using namespace strata;
using namespace strata::artifact;

namespace {

// Two steps: y = exp(x) on the device, then y written back to the host.
Plan smallPlan() {
  Plan p;
  p.mode = "train";
  p.arenaBytes = 128;
  p.hostBytes = 64;
  p.paramsFileBytes = 4096;
  p.slots.push_back({"x", DType::F32, {4}, Region::Arena, 0, 16});
  p.slots.push_back({"y", DType::F32, {4}, Region::Arena, 64, 16});
  p.slots.push_back(
      {"h", DType::F32, {4}, Region::Host, 0, 16, SlotClass::OptimizerState});
  p.inputs.push_back({"x", 0});
  p.params.push_back({"h", 2, ParamEntry::State, 0, 16, 0});
  Step exp, back;
  exp.kernel = Kernel::Exp;
  exp.inputs = {0};
  exp.outputs = {1};
  back.kernel = Kernel::Assign;
  back.inputs = {2, 1};
  p.steps = {exp, back};
  scheduleSteps(p);
  p.predicted = {{Queue::Compute, 0, 0, 5}, {Queue::DeviceToHost, 1, 5, 9}};
  return p;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  static const Plan plan = smallPlan();
  fuzz::MemoryFile file(data + 1, size - 1);
  std::string error;
  std::vector<TraceEvent> trace;
  std::vector<LogRow> log;
  ReportInputs in;
  in.artifactPath = "fuzz";
  bool ok;
  if (data[0] & 1) {
    ok = readTrainingLog(file.path(), log, error);
    in.log = &log;
  } else {
    ok = readTrace(file.path(), trace, error);
    for (const TraceEvent &e : trace)
      if (!(e.endUs >= e.startUs) || e.lane < 0)
        __builtin_trap(); // The reader promises sane events.
    in.trace = &trace;
  }
  if (!ok) {
    if (error.empty())
      __builtin_trap(); // Every refusal says why.
    return 0;
  }
  std::string html = htmlReport(plan, in);
  if (html.find("<script") != std::string::npos)
    __builtin_trap(); // Nothing from the inputs reaches the markup.
  return 0;
}
