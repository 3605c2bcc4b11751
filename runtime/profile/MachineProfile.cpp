// MachineProfile.cpp - What the machine can do, for the cost model.

#include "runtime/profile/MachineProfile.h"
#include "runtime/support/FileUtil.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace strata {

const std::vector<std::pair<const char *, double MachineProfile::*>> &
MachineProfile::fields() {
  static const std::vector<std::pair<const char *, double MachineProfile::*>>
      table = {
          {"matmul_small_gflops", &MachineProfile::matmulSmallGflops},
          {"matmul_medium_gflops", &MachineProfile::matmulMediumGflops},
          {"matmul_large_gflops", &MachineProfile::matmulLargeGflops},
          {"simple_ns_per_element", &MachineProfile::simpleNsPerElement},
          {"transcendental_ns_per_element",
           &MachineProfile::transcendentalNsPerElement},
          {"movement_ns_per_element", &MachineProfile::movementNsPerElement},
          {"launch_us", &MachineProfile::launchUs},
          {"parallel_launch_us", &MachineProfile::parallelLaunchUs},
          {"copy_gbs", &MachineProfile::copyGBs},
          {"ssd_read_gbs", &MachineProfile::ssdReadGBs},
          {"ssd_write_gbs", &MachineProfile::ssdWriteGBs},
          {"ssd_small_read_gbs", &MachineProfile::ssdSmallReadGBs},
          {"ssd_small_write_gbs", &MachineProfile::ssdSmallWriteGBs},
          {"ssd_read_latency_us", &MachineProfile::ssdReadLatencyUs},
          {"ssd_write_latency_us", &MachineProfile::ssdWriteLatencyUs},
          {"overlap_slowdown", &MachineProfile::overlapSlowdown},
          {"ssd_duplex_read_slowdown", &MachineProfile::ssdDuplexReadSlowdown},
          {"ssd_duplex_write_slowdown",
           &MachineProfile::ssdDuplexWriteSlowdown},
          {"queue_round_trip_us", &MachineProfile::queueRoundTripUs},
          {"gpu", &MachineProfile::gpu},
          {"h2d_gbs", &MachineProfile::h2dGBs},
          {"d2h_gbs", &MachineProfile::d2hGBs},
          {"duplex_gbs", &MachineProfile::duplexGBs},
          {"gemm_peak_f32_gflops", &MachineProfile::gemmPeakF32Gflops},
          {"gemm_peak_bf16_gflops", &MachineProfile::gemmPeakBf16Gflops},
          {"cpu_update_gbs", &MachineProfile::cpuUpdateGBs},
          {"comm_gbs", &MachineProfile::commGBs},
          {"comm_latency_us", &MachineProfile::commLatencyUs},
          {"comm_on_host_link", &MachineProfile::commOnHostLink},
          {"net_gbs", &MachineProfile::netGBs},
          {"net_latency_us", &MachineProfile::netLatencyUs}};
  return table;
}

std::string MachineProfile::text() const {
  std::string out = "# Strata machine profile (strata-calibrate)\n";
  for (auto &[key, member] : fields()) {
    char line[128];
    std::snprintf(line, sizeof(line), "%s %.6g\n", key, this->*member);
    out += line;
  }
  return out;
}

bool MachineProfile::write(const std::string &path, std::string &error) const {
  std::string t = text();
  return writeFileAtomically(path, t.data(), t.size(), error);
}

bool MachineProfile::read(const std::string &path, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open the machine profile '" + path + "'";
    return false;
  }
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream ss(line);
    std::string key;
    double value;
    // Rates are positive; the slowdowns, the hand-off and the flags may
    // be 0.
    bool parsed = static_cast<bool>(ss >> key >> value);
    bool mayBeZero =
        key == "overlap_slowdown" || key.rfind("ssd_duplex_", 0) == 0 ||
        key == "queue_round_trip_us" || key == "gpu" ||
        key == "comm_on_host_link" || key == "h2d_gbs" || key == "d2h_gbs" ||
        key == "duplex_gbs" || key.rfind("gemm_peak_", 0) == 0;
    if (!parsed || !(value > 0 || (mayBeZero && value == 0))) {
      error = path + ":" + std::to_string(number) +
              ": expected 'key positive-number'";
      return false;
    }
    bool known = false;
    // Keys of older profiles, before reads and writes were told apart.
    if (key == "ssd_latency_us") {
      ssdReadLatencyUs = ssdWriteLatencyUs = value;
      known = true;
    } else if (key == "ssd_duplex_slowdown") {
      ssdDuplexReadSlowdown = ssdDuplexWriteSlowdown = value;
      known = true;
    }
    for (auto &[name, member] : fields())
      if (key == name) {
        this->*member = value;
        known = true;
      }
    if (!known) {
      error =
          path + ":" + std::to_string(number) + ": unknown key '" + key + "'";
      return false;
    }
  }
  return true;
}

std::string rememberedProfilePath() {
  if (const char *explicitPath = std::getenv("STRATA_PROFILE"))
    return explicitPath;
  if (const char *config = std::getenv("XDG_CONFIG_HOME"); config && *config)
    return std::string(config) + "/strata/machine.profile";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.config/strata/machine.profile";
  return "";
}

} // namespace strata
