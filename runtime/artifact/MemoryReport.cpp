// MemoryReport.cpp - The planned memory of an artifact, by class.

#include "runtime/artifact/MemoryReport.h"
#include "runtime/support/Size.h"

#include <cstdio>
#include <string>
#include <utility>

namespace strata::artifact {

namespace {

/// "bf16 1.00 MiB, f32 3.00 MiB": the bytes of class `cls` by element
/// type as the compiler recorded them ("<cls>:<type>"); empty when they
/// are all of one type (or the artifact predates the split).
std::string byPrecision(const Plan &plan, const std::string &cls) {
  std::string text;
  int types = 0;
  for (const auto &[key, bytes] : plan.memory)
    if (key.size() > cls.size() + 1 && key.compare(0, cls.size(), cls) == 0 &&
        key[cls.size()] == ':' && bytes > 0) {
      text += (types++ ? ", " : "") + key.substr(cls.size() + 1) + " " +
              formatSize(bytes);
    }
  return types > 1 ? text : "";
}

std::string formatMs(uint64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f ms", us / 1e3);
  return buf;
}

} // namespace

std::string formatScheduleFloor(const Plan &plan) {
  // PredictTime.cpp: the backward pass's start plus the busiest queue's
  // work after it (artifact::Queue numbers the queues).
  uint64_t floor = plan.memoryOf("predicted_floor_us"),
           backward = plan.memoryOf("predicted_backward_start_us"),
           step = plan.memoryOf("predicted_step_us"),
           bound = plan.memoryOf("predicted_lower_bound_us");
  if (backward == 0 || floor <= backward || floor * 50 <= bound * 51)
    return "";
  static const char *const kQueues[kNumQueues] = {
      "compute queue",   "host->device queue", "device->host queue",
      "SSD read queue",  "SSD write queue",    "CPU optimizer",
      "all-reduce queue"};
  uint64_t q = plan.memoryOf("predicted_floor_queue");
  return formatMs(floor) + " (the backward pass starts at " +
         formatMs(backward) + " and the " +
         (q < kNumQueues ? kQueues[q] : "?") + " is busy " +
         formatMs(floor - backward) + " after that); the other " +
         formatMs(step > floor ? step - floor : 0) +
         " the queues waited on one another";
}

std::string formatMemoryReport(const Plan &plan) {
  std::string out;
  auto line = [&](const char *name, uint64_t bytes, const std::string &note) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "  %-22s %12s  %s\n", name,
                  formatSize(bytes).c_str(), note.c_str());
    out += buf;
  };
  // A class's split by precision, on a line of its own when it has one.
  auto split = [&](const char *cls) {
    std::string text = byPrecision(plan, cls);
    if (!text.empty())
      out += "      by precision: " + text + "\n";
  };
  uint64_t activations = plan.memoryOf("activations_at_peak");
  uint64_t gradients = plan.memoryOf("gradients_at_peak");
  uint64_t workspace = plan.memoryOf("workspace_at_peak");
  uint64_t live = activations + gradients + workspace;
  out += "memory by class (planned):\n";
  line("parameters", plan.memoryOf("parameters"), "parameter region");
  split("parameters");
  line("optimizer states", plan.memoryOf("optimizer_states"),
       "parameter region");
  split("optimizer_states");
  line("constants", plan.memoryOf("constants"), "parameter region");
  line("device arena peak", plan.arenaBytes,
       plan.arenaBytes > live
           ? "live at the peak + " + formatSize(plan.arenaBytes - live) +
                 " fragmentation"
           : "all live at the peak");
  line("  activations", activations,
       "at the peak (max " + formatSize(plan.memoryOf("activations_max")) +
           ")");
  split("activations_at_peak");
  line("  gradients", gradients,
       "at the peak (max " + formatSize(plan.memoryOf("gradients_max")) +
           ", largest single " + formatSize(plan.memoryOf("largest_gradient")) +
           ")");
  split("gradients_at_peak");
  line("  workspace", workspace,
       "at the peak (max " + formatSize(plan.memoryOf("workspace_max")) + ")");
  split("workspace_at_peak");
  line("total", plan.arenaBytes + plan.paramsBytes,
       "device arena + parameter region");
  if (plan.memoryOf("predicted_step_us") > 0) {
    char buf[400];
    std::snprintf(
        buf, sizeof(buf),
        "predicted step time: %.3f ms with transfers overlapping compute "
        "(%.3f ms one after another: compute %.3f, host->device %.3f, "
        "device->host %.3f, ssd %.3f, cpu updates %.3f); lower bound (the "
        "busiest of these) %.3f ms\n",
        plan.memoryOf("predicted_step_us") / 1e3,
        plan.memoryOf("predicted_serial_us") / 1e3,
        plan.memoryOf("predicted_compute_us") / 1e3,
        plan.memoryOf("predicted_host_to_device_us") / 1e3,
        plan.memoryOf("predicted_device_to_host_us") / 1e3,
        plan.memoryOf("predicted_ssd_link_us") / 1e3,
        plan.memoryOf("predicted_cpu_update_us") / 1e3,
        plan.memoryOf("predicted_lower_bound_us") / 1e3);
    out += buf;
    if (std::string floor = formatScheduleFloor(plan); !floor.empty())
      out += "this schedule's floor: " + floor + "\n";
  }
  if (uint64_t n = plan.memoryOf("cpu_updates")) {
    // --strata-offload-optimizer: the updates on the CPU queue.
    char buf[400];
    double cpu = plan.memoryOf("predicted_cpu_update_us") / 1e3,
           exposed = plan.memoryOf("predicted_cpu_exposed_us") / 1e3;
    // Artifacts from before updates were grouped into jobs lack the count.
    uint64_t jobs = plan.memoryOf("cpu_jobs");
    std::string inJobs = jobs ? " in " + std::to_string(jobs) + " CPU job" +
                                    (jobs == 1 ? "" : "s")
                              : "";
    std::snprintf(
        buf, sizeof(buf),
        "optimizer on the CPU: %llu updates%s (%llu overlap the "
        "backward pass, %llu stay on the device); predicted %.3f "
        "ms of CPU work, %.3f ms of it hidden behind the device's "
        "work, %.3f ms exposed\n",
        static_cast<unsigned long long>(n), inJobs.c_str(),
        static_cast<unsigned long long>(plan.memoryOf("overlapping_backward")),
        static_cast<unsigned long long>(plan.memoryOf("device_updates")), cpu,
        cpu - exposed, exposed);
    out += buf;
    if (uint64_t s = plan.memoryOf("speculative")) {
      std::snprintf(buf, sizeof(buf),
                    "  %llu of them speculate (exact clipping): they run "
                    "beside the backward pass as if the step did not clip, "
                    "predicted so; a step that clips redoes them after it "
                    "(--speculate-updates)\n",
                    static_cast<unsigned long long>(s));
      out += buf;
    }
  }
  if (uint64_t n = plan.memoryOf("planner_evaluated")) {
    // The naive plans the planner scored beside its own.
    auto naive = [&](const char *key, const char *what) -> std::string {
      std::string k = key;
      if (uint64_t us = plan.memoryOf(k + "_us"))
        return std::string(what) + " " + formatMs(us);
      if (uint64_t over = plan.memoryOf(k + "_over_bytes"))
        return std::string(what) + " misses the budgets by " + formatSize(over);
      return "";
    };
    out += "planner: best of " + std::to_string(n) +
           " placements scored (memory planned, step predicted)";
    if (uint64_t distinct = plan.memoryOf("planner_distinct"))
      out += ", " + std::to_string(distinct) +
             " of them distinct (the rest met again and taken from the "
             "cache)";
    std::string sep = "; ";
    for (auto [key, what] :
         {std::pair{"planner_greedy", "the greedy start:"},
          std::pair{"planner_swap_all", "swapping every activation:"},
          std::pair{"planner_recompute_all", "recomputing every one:"}}) {
      std::string s = naive(key, what);
      if (!s.empty()) {
        out += sep + s;
        sep = ", ";
      }
    }
    out += "\n";
    if (uint64_t bound = plan.memoryOf("planner_bound_us")) {
      // PlacementBound.cpp: no placement within the budgets can be
      // predicted faster.
      char buf[768];
      double chosen = plan.memoryOf("predicted_step_us");
      auto ms = [&](const char *key) { return plan.memoryOf(key) / 1e3; };
      // The rows only some plans have: the collectives' queue (data
      // parallel), a GPU's host link both ways (its directions share the
      // duplex rate).
      std::string extra;
      for (auto [key, name] :
           {std::pair{"planner_bound_comm_us", "collectives"},
            std::pair{"planner_bound_link_us", "the host link both ways"}})
        if (plan.memoryOf(key)) {
          std::snprintf(buf, sizeof(buf), ", %s %.3f", name, ms(key));
          extra += buf;
        }
      std::snprintf(
          buf, sizeof(buf),
          "planner bound: no placement within the budgets is predicted "
          "under %.3f ms (compute %.3f, host->device %.3f, device->host "
          "%.3f, updates and fetches over the host link and the CPU %.3f, "
          "ssd read %.3f, ssd write %.3f%s); the choice is %.3fx it\n",
          bound / 1e3, ms("planner_bound_compute_us"),
          ms("planner_bound_to_device_us"), ms("planner_bound_to_host_us"),
          ms("planner_bound_updates_us"), ms("planner_bound_ssd_read_us"),
          ms("planner_bound_ssd_write_us"), extra.c_str(),
          chosen / double(bound));
      out += buf;
      if (plan.memoryOf("planner_bound_relaxed_us")) {
        // The memory relaxation: how the budget's pressure is paid at
        // least, fractionally.
        auto gib = [&](const char *key) {
          return double(plan.memoryOf(key)) / (1024.0 * 1024 * 1024);
        };
        // Without a GPU host copies run on the compute thread, and the
        // programme prices the SSD's queues instead of the host link's.
        char queues[256];
        if (plan.memoryOf("planner_relaxed_host_only"))
          std::snprintf(queues, sizeof(queues),
                        "compute thread (kernels and host copies) %.3f, SSD "
                        "reads %.3f, SSD writes %.3f, the drives both ways "
                        "%.3f",
                        ms("planner_relaxed_compute_us"),
                        ms("planner_relaxed_ssd_read_us"),
                        ms("planner_relaxed_ssd_write_us"),
                        ms("planner_relaxed_ssd_shared_us"));
        else
          std::snprintf(queues, sizeof(queues),
                        "compute %.3f, host->device %.3f, device->host "
                        "%.3f, the host link both ways %.3f",
                        ms("planner_relaxed_compute_us"),
                        ms("planner_relaxed_to_device_us"),
                        ms("planner_relaxed_to_host_us"),
                        ms("planner_relaxed_link_us"));
        std::snprintf(
            buf, sizeof(buf),
            "  memory relaxation: %.3f ms (the linear programme over keeping, "
            "fetching, swapping, recomputing and CPU updates, at its "
            "optimum: %s, CPU optimizer %.3f ms; off the device: %.2f GiB of "
            "activations recomputed, %.2f GiB swapped, %.2f GiB of stored "
            "tensors fetched, %.2f GiB updated on the CPU)\n",
            ms("planner_bound_relaxed_us"), queues,
            ms("planner_relaxed_cpu_us"),
            gib("planner_relaxed_recomputed_bytes"),
            gib("planner_relaxed_swapped_bytes"),
            gib("planner_relaxed_fetched_bytes"),
            gib("planner_relaxed_cpu_bytes"));
        out += buf;
      }
    }
  }
  return out;
}

} // namespace strata::artifact
