// HtmlReport.cpp - The HTML page of strata-inspect --html.

#include "runtime/artifact/HtmlReport.h"
#include "runtime/artifact/MemoryReport.h"
#include "runtime/support/Size.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>

namespace strata::artifact {

//===----------------------------------------------------------------------===//
// Drawing
//===----------------------------------------------------------------------===//

namespace {

std::string escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      // Control bytes are not allowed in HTML text.
      if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t')
        out += c;
    }
  }
  return out;
}

std::string fmt(const char *format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

/// "1.234 ms" from microseconds.
std::string ms(double us) { return fmt("%.3f ms", us / 1e3); }

const char *kClassColor[kNumSlotClasses] = {
    "#4e79a7", // activations
    "#e15759", // gradients
    "#f28e2b", // workspace
    "#76b7b2", // inputs
    "#59a14f", // parameters
    "#edc948", // optimizer state
    "#b07aa1", // constants
};
/// Stacking order, bottom up: what stays put first.
const SlotClass kStackOrder[kNumSlotClasses] = {
    SlotClass::Parameter, SlotClass::OptimizerState, SlotClass::Constant,
    SlotClass::Input,     SlotClass::Activation,     SlotClass::Gradient,
    SlotClass::Workspace};
const char *kQueueColor[kNumQueues] = {"#4e79a7", "#59a14f", "#9c755f",
                                       "#f28e2b", "#e15759", "#b07aa1",
                                       "#ff9da7"};

// The plot area of every chart.
constexpr double kLeft = 90, kPlotWidth = 820, kRight = 20;
constexpr double kWidth = kLeft + kPlotWidth + kRight;

std::string
legend(const std::vector<std::pair<std::string, const char *>> &entries) {
  std::string out = "<div class=\"legend\">";
  for (const auto &[label, color] : entries)
    out += std::string("<span><i style=\"background:") + color + "\"></i>" +
           escape(label) + "</span>";
  return out + "</div>\n";
}

/// A stacked-area chart of one tier's live bytes by class.
std::string memoryChart(const MemoryOverStep &m, Tier tier, const char *id,
                        const std::string &capacityLabel) {
  int t = static_cast<int>(tier);
  const double height = 200, top = 10, plotHeight = 160;
  uint64_t peak = m.peak(tier);
  uint64_t capacity = m.capacity[t];
  double yMax = static_cast<double>(std::max(peak, capacity)) * 1.05;
  if (yMax <= 0)
    yMax = 1;
  // At most one column per pixel: each keeps the position where the total
  // is largest, so the peak is drawn.
  size_t bins = std::min<size_t>(m.positions, static_cast<size_t>(kPlotWidth));
  std::vector<size_t> pick(bins);
  for (size_t b = 0; b < bins; ++b) {
    size_t from = b * m.positions / bins, to = (b + 1) * m.positions / bins;
    size_t best = from;
    uint64_t most = 0;
    for (size_t p = from; p < to; ++p)
      if (uint64_t live = m.total(tier, p); p == from || live > most) {
        best = p;
        most = live;
      }
    pick[b] = best;
  }
  auto x = [&](size_t b) { return kLeft + kPlotWidth * b / double(bins); };
  auto y = [&](double bytes) {
    return top + plotHeight - plotHeight * bytes / yMax;
  };
  std::string svg = "<svg id=\"" + std::string(id) +
                    "\" class=\"chart\" width=\"" + fmt("%.0f", kWidth) +
                    "\" height=\"" + fmt("%.0f", height) +
                    "\" data-peak-bytes=\"" + std::to_string(peak) +
                    "\" data-capacity-bytes=\"" + std::to_string(capacity) +
                    "\" data-positions=\"" + std::to_string(m.positions) +
                    "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
  std::vector<double> below(bins, 0);
  for (SlotClass cls : kStackOrder) {
    const std::vector<uint64_t> &v = m.live[t][static_cast<int>(cls)];
    bool any = false;
    for (size_t b = 0; b < bins && !any; ++b)
      any = v[pick[b]] > 0;
    if (!any)
      continue;
    std::string upper, lower;
    uint64_t classPeak = 0;
    for (size_t b = 0; b < bins; ++b) {
      double lo = below[b], hi = lo + static_cast<double>(v[pick[b]]);
      classPeak = std::max(classPeak, v[pick[b]]);
      upper += fmt("%.1f,", x(b)) + fmt("%.1f ", y(hi)) +
               fmt("%.1f,", x(b + 1)) + fmt("%.1f ", y(hi));
      lower = fmt("%.1f,", x(b + 1)) + fmt("%.1f ", y(lo)) +
              fmt("%.1f,", x(b)) + fmt("%.1f ", y(lo)) + lower;
      below[b] = hi;
    }
    svg += std::string("<polygon class=\"area\" data-class=\"") +
           slotClassName(cls) + "\" fill=\"" +
           kClassColor[static_cast<int>(cls)] + "\" points=\"" + upper + lower +
           "\"><title>" + slotClassName(cls) + ": up to " +
           formatSize(classPeak) + "</title></polygon>\n";
  }
  // Axes, the capacity line and labels.
  svg += "<line class=\"axis\" x1=\"" + fmt("%.1f", kLeft) + "\" y1=\"" +
         fmt("%.1f", y(0)) + "\" x2=\"" + fmt("%.1f", kLeft + kPlotWidth) +
         "\" y2=\"" + fmt("%.1f", y(0)) + "\"/>\n";
  for (double f : {0.0, 0.5, 1.0}) {
    double bytes = yMax / 1.05 * f;
    svg += "<text class=\"tick\" x=\"" + fmt("%.1f", kLeft - 6) + "\" y=\"" +
           fmt("%.1f", y(bytes) + 4) + "\" text-anchor=\"end\">" +
           formatSize(static_cast<uint64_t>(bytes)) + "</text>\n";
  }
  if (capacity > 0)
    svg += "<line class=\"capacity\" x1=\"" + fmt("%.1f", kLeft) + "\" y1=\"" +
           fmt("%.1f", y(double(capacity))) + "\" x2=\"" +
           fmt("%.1f", kLeft + kPlotWidth) + "\" y2=\"" +
           fmt("%.1f", y(double(capacity))) + "\"><title>" +
           escape(capacityLabel) + ": " + formatSize(capacity) +
           "</title></line>\n";
  svg += "<text class=\"tick\" x=\"" + fmt("%.1f", kLeft) + "\" y=\"" +
         fmt("%.1f", height - 8) + "\">step 0</text>\n";
  svg += "<text class=\"tick\" x=\"" + fmt("%.1f", kLeft + kPlotWidth) +
         "\" y=\"" + fmt("%.1f", height - 8) + "\" text-anchor=\"end\">step " +
         std::to_string(m.positions ? m.positions - 1 : 0) +
         " (issue order)</text>\n";
  return svg + "</svg>\n";
}

/// A stretch of work drawn on a timeline.
struct Bar {
  int lane;
  double startUs, endUs;
  std::string title;
};

/// Lanes of the queues, top to bottom.
const char *kLaneNames[kNumQueues] = {
    "compute",   "host->device", "device->host", "ssd read",
    "ssd write", "cpu",          "comm"};

/// Lane rectangles on a shared time scale of `spanUs`; bars narrower than
/// a pixel that touch are drawn as one.
std::string timeline(const char *id, const std::vector<Bar> &bars,
                     double spanUs, const std::string &dataAttributes) {
  const double laneHeight = 22, top = 8;
  double height = top + kNumQueues * laneHeight + 28;
  double scale = spanUs > 0 ? kPlotWidth / spanUs : 0;
  std::string svg = "<svg id=\"" + std::string(id) +
                    "\" class=\"chart\" width=\"" + fmt("%.0f", kWidth) +
                    "\" height=\"" + fmt("%.0f", height) + "\" " +
                    dataAttributes + " xmlns=\"http://www.w3.org/2000/svg\">\n";
  for (int lane = 0; lane < static_cast<int>(kNumQueues); ++lane) {
    double y = top + lane * laneHeight;
    svg += "<rect class=\"lane\" x=\"" + fmt("%.1f", kLeft) + "\" y=\"" +
           fmt("%.1f", y) + "\" width=\"" + fmt("%.1f", kPlotWidth) +
           "\" height=\"" + fmt("%.1f", laneHeight - 4) + "\"/>\n";
    svg += "<text class=\"tick\" x=\"" + fmt("%.1f", kLeft - 6) + "\" y=\"" +
           fmt("%.1f", y + 13) + "\" text-anchor=\"end\">" + kLaneNames[lane] +
           "</text>\n";
  }
  std::vector<std::vector<const Bar *>> byLane(kNumQueues);
  for (const Bar &b : bars)
    if (b.lane >= 0 && b.lane < static_cast<int>(kNumQueues))
      byLane[b.lane].push_back(&b);
  for (int lane = 0; lane < static_cast<int>(kNumQueues); ++lane) {
    std::vector<const Bar *> &list = byLane[lane];
    std::sort(list.begin(), list.end(), [](const Bar *a, const Bar *b) {
      return a->startUs < b->startUs;
    });
    double y = top + lane * laneHeight;
    for (size_t i = 0; i < list.size();) {
      double x0 = list[i]->startUs * scale, x1 = list[i]->endUs * scale;
      std::string title = list[i]->title;
      size_t j = i + 1;
      if (x1 - x0 < 1) {
        while (j < list.size() && list[j]->startUs * scale <= x1 + 1 &&
               list[j]->endUs * scale - list[j]->startUs * scale < 1)
          x1 = std::max(x1, list[j++]->endUs * scale);
        if (j - i > 1)
          title = std::to_string(j - i) + " short stretches from " +
                  ms(list[i]->startUs);
      }
      svg += "<rect class=\"bar\" x=\"" + fmt("%.2f", kLeft + x0) + "\" y=\"" +
             fmt("%.1f", y) + "\" width=\"" +
             fmt("%.2f", std::max(x1 - x0, 0.5)) + "\" height=\"" +
             fmt("%.1f", laneHeight - 4) + "\" fill=\"" + kQueueColor[lane] +
             "\"><title>" + escape(title) + "</title></rect>\n";
      i = j;
    }
  }
  double axisY = top + kNumQueues * laneHeight + 14;
  for (double f : {0.0, 0.25, 0.5, 0.75, 1.0})
    svg += "<text class=\"tick\" x=\"" + fmt("%.1f", kLeft + kPlotWidth * f) +
           "\" y=\"" + fmt("%.1f", axisY) + "\" text-anchor=\"" +
           (f == 0   ? "start"
            : f == 1 ? "end"
                     : "middle") +
           "\">" + ms(spanUs * f) + "</text>\n";
  return svg + "</svg>\n";
}

/// The measured run drawn: the last run of the plan in the trace.
struct MeasuredRun {
  bool found = false;
  double startUs = 0, durationUs = 0;
  std::vector<Bar> bars;
  size_t events = 0;
  /// Plan steps with an event in the run.
  size_t stepsCovered = 0;
  size_t runs = 0;
};

MeasuredRun measuredRun(const Plan &plan,
                        const std::vector<TraceEvent> &events) {
  MeasuredRun run;
  const TraceEvent *last = nullptr;
  double from = INFINITY, to = -INFINITY;
  for (const TraceEvent &e : events) {
    if (e.lane == 0 && e.category == "run") {
      ++run.runs;
      if (!last || e.startUs > last->startUs)
        last = &e;
    }
    from = std::min(from, e.startUs);
    to = std::max(to, e.endUs);
  }
  if (last) {
    from = last->startUs;
    to = last->endUs;
  }
  if (!(to >= from))
    return run;
  run.found = true;
  run.startUs = from;
  run.durationUs = to - from;
  std::set<int64_t> steps;
  for (const TraceEvent &e : events) {
    if (e.lane <= 0 || e.startUs < from || e.startUs > to)
      continue;
    int lane = e.lane == 1 ? static_cast<int>(Queue::Compute)
               : e.lane == 2
                   ? static_cast<int>(e.category == "d2h" ? Queue::DeviceToHost
                                                          : Queue::HostToDevice)
               : e.lane == 3 ? static_cast<int>(Queue::SsdRead)
               : e.lane == 4 ? static_cast<int>(Queue::SsdWrite)
               : e.lane == 5 ? static_cast<int>(Queue::Cpu)
               : e.lane == 6 ? static_cast<int>(Queue::Comm)
                             : -1;
    if (lane < 0)
      continue;
    ++run.events;
    if (e.step >= 0 && static_cast<uint64_t>(e.step) < plan.steps.size())
      steps.insert(e.step);
    std::string title =
        (e.step >= 0 ? "step " + std::to_string(e.step) + " " : std::string()) +
        e.category + " " + e.name + ": " + ms(e.endUs - e.startUs);
    run.bars.push_back({lane, e.startUs - from, e.endUs - from, title});
  }
  run.stepsCovered = steps.size();
  return run;
}

std::string kv(const std::string &key, const std::string &value) {
  return "<tr><th>" + escape(key) + "</th><td>" + escape(value) +
         "</td></tr>\n";
}

/// A horizontal bar chart: label, value (microseconds) or a note.
std::string plannerChart(const Plan &plan) {
  struct Row {
    std::string label;
    double us;
    std::string note;
  };
  std::vector<Row> rows;
  rows.push_back({"the plan compiled (predicted)",
                  double(plan.memoryOf("predicted_step_us")), ""});
  for (auto [key, label] :
       {std::pair{"planner_greedy", "the greedy start"},
        std::pair{"planner_swap_all", "swapping every activation"},
        std::pair{"planner_recompute_all", "recomputing every activation"}}) {
    std::string k = key;
    if (uint64_t us = plan.memoryOf(k + "_us"))
      rows.push_back({label, double(us), ""});
    else if (uint64_t over = plan.memoryOf(k + "_over_bytes"))
      rows.push_back({label, 0, "misses the budgets by " + formatSize(over)});
  }
  double most = 0;
  for (const Row &r : rows)
    most = std::max(most, r.us);
  const double rowHeight = 24, labelWidth = 230;
  double width = kWidth, barWidth = width - labelWidth - 120;
  std::string svg = "<svg id=\"planner\" class=\"chart\" width=\"" +
                    fmt("%.0f", width) + "\" height=\"" +
                    fmt("%.0f", rows.size() * rowHeight + 8) +
                    "\" data-rows=\"" + std::to_string(rows.size()) +
                    "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row &r = rows[i];
    double y = 4 + i * rowHeight;
    svg += "<text class=\"tick\" x=\"" + fmt("%.1f", labelWidth - 8) +
           "\" y=\"" + fmt("%.1f", y + 14) + "\" text-anchor=\"end\">" +
           escape(r.label) + "</text>\n";
    if (!r.note.empty()) {
      svg += "<text class=\"note\" x=\"" + fmt("%.1f", labelWidth) + "\" y=\"" +
             fmt("%.1f", y + 14) + "\">" + escape(r.note) + "</text>\n";
      continue;
    }
    double w = most > 0 ? barWidth * r.us / most : 0;
    svg += "<rect class=\"bar\" x=\"" + fmt("%.1f", labelWidth) + "\" y=\"" +
           fmt("%.1f", y) + "\" width=\"" + fmt("%.1f", std::max(w, 1.0)) +
           "\" height=\"" + fmt("%.1f", rowHeight - 6) + "\" fill=\"" +
           (i == 0 ? "#4e79a7" : "#bab0ac") + "\"/>\n";
    svg += "<text class=\"tick\" x=\"" + fmt("%.1f", labelWidth + w + 6) +
           "\" y=\"" + fmt("%.1f", y + 14) + "\">" + ms(r.us) + "</text>\n";
  }
  return svg + "</svg>\n";
}

std::string lossChart(const std::vector<LogRow> &rows) {
  const double height = 220, top = 10, plotHeight = 170;
  double lo = INFINITY, hi = -INFINITY;
  int64_t s0 = INT64_MAX, s1 = INT64_MIN;
  size_t points = 0, missing = 0;
  for (const LogRow &r : rows) {
    s0 = std::min(s0, r.step);
    s1 = std::max(s1, r.step);
    if (!std::isfinite(r.loss)) {
      ++missing;
      continue;
    }
    ++points;
    lo = std::min(lo, r.loss);
    hi = std::max(hi, r.loss);
  }
  std::string svg = "<svg id=\"loss-curve\" class=\"chart\" width=\"" +
                    fmt("%.0f", kWidth) + "\" height=\"" + fmt("%.0f", height) +
                    "\" data-points=\"" + std::to_string(points) +
                    "\" data-diverged=\"" + std::to_string(missing) +
                    "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
  if (points == 0)
    return svg + "<text class=\"note\" x=\"" + fmt("%.0f", kLeft) +
           "\" y=\"40\">no finite loss in the log</text></svg>\n";
  if (hi - lo < 1e-12)
    hi = lo + 1;
  double stepSpan = s1 > s0 ? double(s1 - s0) : 1;
  auto x = [&](int64_t s) {
    return kLeft + kPlotWidth * double(s - s0) / stepSpan;
  };
  auto y = [&](double v) {
    return top + plotHeight - plotHeight * (v - lo) / (hi - lo);
  };
  std::string line;
  for (const LogRow &r : rows)
    if (std::isfinite(r.loss))
      line += fmt("%.1f,", x(r.step)) + fmt("%.1f ", y(r.loss));
    else
      svg += "<line class=\"diverged\" x1=\"" + fmt("%.1f", x(r.step)) +
             "\" y1=\"" + fmt("%.1f", top) + "\" x2=\"" +
             fmt("%.1f", x(r.step)) + "\" y2=\"" + fmt("%.1f", top + 8) +
             "\"><title>step " + std::to_string(r.step) +
             ": the loss was not finite</title></line>\n";
  svg += "<polyline class=\"loss\" points=\"" + line + "\"/>\n";
  for (double v : {lo, (lo + hi) / 2, hi})
    svg += "<text class=\"tick\" x=\"" + fmt("%.1f", kLeft - 6) + "\" y=\"" +
           fmt("%.1f", y(v) + 4) + "\" text-anchor=\"end\">" + fmt("%.4g", v) +
           "</text>\n";
  svg += "<text class=\"tick\" x=\"" + fmt("%.1f", kLeft) + "\" y=\"" +
         fmt("%.1f", height - 10) + "\">step " + std::to_string(s0) +
         "</text>\n<text class=\"tick\" x=\"" +
         fmt("%.1f", kLeft + kPlotWidth) + "\" y=\"" +
         fmt("%.1f", height - 10) + "\" text-anchor=\"end\">step " +
         std::to_string(s1) + "</text>\n";
  return svg + "</svg>\n";
}

const char *kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 960px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; }
h3 { font-size: 14px; margin: 14px 0 4px; }
table { border-collapse: collapse; margin: 6px 0; } th, td { padding: 2px 10px; text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.grid td, table.grid th { border-bottom: 1px solid #eee; }
.legend span { margin-right: 14px; font-size: 12px; white-space: nowrap; }
.legend i { display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px; }
.chart { display: block; margin: 4px 0 8px; }
.tick { font-size: 11px; fill: #555; } .note { font-size: 12px; fill: #a33; }
.axis { stroke: #888; } .capacity { stroke: #222; stroke-dasharray: 5 4; stroke-width: 1.2; }
.lane { fill: #f4f4f4; } .loss { fill: none; stroke: #4e79a7; stroke-width: 1.5; }
.diverged { stroke: #e15759; stroke-width: 2; }
.muted { color: #666; } pre { background: #f7f7f7; padding: 8px; overflow-x: auto; font-size: 12px; }
)";

} // namespace

//===----------------------------------------------------------------------===//
// The page
//===----------------------------------------------------------------------===//

std::string htmlReport(const Plan &plan, const ReportInputs &in) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<link rel=\"icon\" href=\"data:,\">\n<title>Strata report: " +
      escape(in.artifactPath) + "</title>\n<style>" + kStyle +
      "</style>\n</head>\n<body>\n";
  html += "<h1>Strata report: " + escape(in.artifactPath) + "</h1>\n";
  html += "<table id=\"summary\">\n";
  html += kv("model", plan.sourceModel);
  html += kv("mode", plan.mode == "train" ? "training step" : plan.mode);
  if (!plan.optimizer.empty())
    html += kv("optimizer", plan.optimizer);
  html += kv("steps (kernel launches and transfers)",
             std::to_string(plan.steps.size()));
  html += kv("compiled by", plan.producer);
  html += "</table>\n";

  // Memory over the step, per tier.
  MemoryOverStep memory = memoryOverStep(plan);
  html += "<h2>Memory over the step (planned)</h2>\n<p class=\"muted\">Bytes "
          "live on each tier at each step of one run, in the order the "
          "runtime issues them, stacked by what they hold. The dashed line "
          "is the tier's size in the plan.</p>\n";
  std::vector<std::pair<std::string, const char *>> classes;
  for (SlotClass cls : kStackOrder)
    classes.push_back({slotClassName(cls), kClassColor[static_cast<int>(cls)]});
  html += legend(classes);
  const char *tierIds[kNumTiers] = {"memory-device", "memory-host",
                                    "memory-ssd"};
  const char *tierTitles[kNumTiers] = {"Device", "Host memory", "SSD"};
  const char *capacityLabels[kNumTiers] = {"device arena + parameter region",
                                           "host region", "SSD store"};
  for (int t = 0; t < kNumTiers; ++t) {
    Tier tier = static_cast<Tier>(t);
    uint64_t peak = memory.peak(tier);
    html += std::string("<h3>") + tierTitles[t] + ": peak " + formatSize(peak) +
            " of " + formatSize(memory.capacity[t]) + "</h3>\n";
    if (peak == 0 && memory.capacity[t] == 0) {
      html += "<p class=\"muted\" id=\"" + std::string(tierIds[t]) +
              "\">Nothing on this tier.</p>\n";
      continue;
    }
    html += memoryChart(memory, tier, tierIds[t], capacityLabels[t]);
  }

  // The queues over the step.
  html += "<h2>The queues over the step</h2>\n";
  const std::pair<const char *, const char *> resources[] = {
      {"predicted_compute_us", "compute"},
      {"predicted_host_to_device_us", "host->device copies"},
      {"predicted_device_to_host_us", "device->host copies"},
      {"predicted_ssd_read_us", "SSD reads"},
      {"predicted_ssd_write_us", "SSD writes"},
      {"predicted_cpu_update_us", "CPU updates"}};
  std::string bound = "";
  uint64_t boundUs = 0;
  for (auto [key, what] : resources)
    if (plan.memoryOf(key) > boundUs) {
      boundUs = plan.memoryOf(key);
      bound = what;
    }
  double predictedUs = plan.memoryOf("predicted_step_us");
  html += "<table id=\"step-time\">\n";
  if (predictedUs > 0) {
    html += kv("predicted step", ms(predictedUs));
    html += kv("lower bound (the busiest resource with perfect overlap)",
               ms(plan.memoryOf("predicted_lower_bound_us")) +
                   (bound.empty() ? "" : ", set by " + bound));
    html += kv("one after another", ms(plan.memoryOf("predicted_serial_us")));
    if (std::string floor = formatScheduleFloor(plan); !floor.empty())
      html += kv("this schedule's floor (the order of the work)", floor);
  } else {
    html += kv("predicted step", "not in this plan (compiled without "
                                 "--strata-predict-time)");
  }
  MeasuredRun run;
  if (in.trace)
    run = measuredRun(plan, *in.trace);
  if (run.found)
    html += kv("measured run of the plan (" + in.tracePath + ")",
               ms(run.durationUs) + " (the last of " +
                   std::to_string(run.runs) + " traced runs)");
  if (in.log && !in.log->empty()) {
    std::vector<double> times;
    for (const LogRow &r : *in.log)
      if (r.stepSeconds > 0)
        times.push_back(r.stepSeconds);
    if (!times.empty()) {
      std::nth_element(times.begin(), times.begin() + times.size() / 2,
                       times.end());
      html += kv("median training step (" + in.logPath + ")",
                 ms(times[times.size() / 2] * 1e6) + " over " +
                     std::to_string(times.size()) + " steps");
    }
  }
  html += "</table>\n";
  std::vector<std::pair<std::string, const char *>> lanes;
  for (size_t q = 0; q < kNumQueues; ++q)
    lanes.push_back({kLaneNames[q], kQueueColor[q]});
  html += legend(lanes);
  std::vector<Bar> predicted;
  double predictedEnd = 0;
  double busy[2][kNumQueues] = {};
  for (const PredictedSpan &s : plan.predicted) {
    const Step &step = plan.steps[s.step];
    std::string what = std::string(kernelName(step.kernel));
    if (!step.outputs.empty())
      what += " -> " + plan.slots[step.outputs[0]].name;
    else if (!step.inputs.empty())
      what += " " + plan.slots[step.inputs[0]].name;
    predicted.push_back({static_cast<int>(s.queue), s.startUs, s.endUs,
                         "step " + std::to_string(s.step) + " " + what + ": " +
                             ms(s.endUs - s.startUs)});
    predictedEnd = std::max(predictedEnd, s.endUs);
    busy[0][static_cast<int>(s.queue)] += s.endUs - s.startUs;
  }
  for (const Bar &b : run.bars)
    busy[1][b.lane] += b.endUs - b.startUs;
  double span = std::max(predictedEnd, run.found ? run.durationUs : 0.0);
  html += "<h3>Predicted by the compiler's cost model</h3>\n";
  if (plan.predicted.empty())
    html += "<p class=\"muted\" id=\"timeline-predicted\">This plan carries "
            "no predicted schedule.</p>\n";
  else
    html +=
        timeline("timeline-predicted", predicted, span,
                 "data-spans=\"" + std::to_string(predicted.size()) +
                     "\" data-end-us=\"" + fmt("%.3f", predictedEnd) + "\"");
  html += "<h3>Measured</h3>\n";
  if (!in.trace)
    html += "<p class=\"muted\" id=\"timeline-measured\">No trace given "
            "(strata-run --trace FILE, then --trace FILE here).</p>\n";
  else if (!run.found)
    html += "<p class=\"muted\" id=\"timeline-measured\">The trace has no "
            "events.</p>\n";
  else
    html += timeline(
        "timeline-measured", run.bars, span,
        "data-events=\"" + std::to_string(run.events) +
            "\" data-steps-covered=\"" + std::to_string(run.stepsCovered) +
            "\" data-run-us=\"" + fmt("%.3f", run.durationUs) + "\"");
  html += "<table class=\"grid\" id=\"queue-busy\"><tr><th>queue</th><th "
          "class=\"num\">busy, predicted</th><th class=\"num\">busy, "
          "measured</th></tr>\n";
  for (size_t q = 0; q < kNumQueues; ++q)
    html += std::string("<tr><td>") + kLaneNames[q] +
            "</td><td class=\"num\">" + ms(busy[0][q]) +
            "</td><td class=\"num\">" + (run.found ? ms(busy[1][q]) : "-") +
            "</td></tr>\n";
  html += "</table>\n";

  // Placement by tier: peak bytes of each class on each tier.
  html += "<h2>Placement</h2>\n<table class=\"grid\" id=\"placement\"><tr>"
          "<th>what</th><th class=\"num\">device</th><th class=\"num\">host"
          "</th><th class=\"num\">SSD</th></tr>\n";
  for (SlotClass cls : kStackOrder) {
    uint64_t peaks[kNumTiers] = {0, 0, 0};
    for (int t = 0; t < kNumTiers; ++t)
      for (uint64_t v : memory.live[t][static_cast<int>(cls)])
        peaks[t] = std::max(peaks[t], v);
    if (peaks[0] + peaks[1] + peaks[2] == 0)
      continue;
    html += std::string("<tr><td>") + slotClassName(cls) + "</td>";
    for (uint64_t p : peaks)
      html += "<td class=\"num\">" + (p ? formatSize(p) : "-") + "</td>";
    html += "</tr>\n";
  }
  html += "</table>\n<p class=\"muted\">Stored tensors in full; the others "
          "at their peak over the step.</p>\n";

  // The planner's choice against the naive plans.
  html += "<h2>The planner's choice</h2>\n";
  if (uint64_t n = plan.memoryOf("planner_evaluated")) {
    html += "<p>Best of " + std::to_string(n) +
            " placements scored (memory planned, step predicted), against "
            "the naive plans:</p>\n";
    html += plannerChart(plan);
  } else {
    html += "<p class=\"muted\" id=\"planner\">The planner had no choice to "
            "make: everything fits on the device.</p>\n";
  }

  // The loss curve.
  html += "<h2>Loss</h2>\n";
  if (in.log && !in.log->empty())
    html += "<p class=\"muted\">From " + escape(in.logPath) + ".</p>\n" +
            lossChart(*in.log);
  else
    html += "<p class=\"muted\" id=\"loss-curve\">No training log given "
            "(strata-run --log-json FILE, then --log-json FILE here).</p>\n";

  html += "<h2>The compiler's memory report</h2>\n<pre id=\"memory-report\">" +
          escape(formatMemoryReport(plan)) + "</pre>\n";
  html += "</body>\n</html>\n";
  return html;
}

} // namespace strata::artifact
