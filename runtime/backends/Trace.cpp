// Trace.cpp - Chrome-trace events of a run.

#include "runtime/backends/Trace.h"
#include "runtime/support/FileUtil.h"

#include <cstdio>

namespace strata::runtime {

static std::string escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20)
      out += c;
  }
  return out;
}

bool Trace::write(const std::string &path, std::string &error) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string json = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  const char *laneNames[] = {"plan runs", "compute",   "host<->device",
                             "ssd read",  "ssd write", "cpu optimizer",
                             "all-reduce"};
  for (int lane = 0; lane <= static_cast<int>(Lane::Comm); ++lane) {
    char meta[160];
    std::snprintf(meta, sizeof(meta),
                  "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, "
                  "\"tid\": %d, \"args\": {\"name\": \"%s\"}},\n",
                  lane, laneNames[lane]);
    json += meta;
  }
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event &e = events_[i];
    char numbers[200];
    std::snprintf(numbers, sizeof(numbers),
                  "\"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"ts\": %.3f, "
                  "\"dur\": %.3f, \"args\": {\"bytes\": %llu, \"step\": "
                  "%lld}}",
                  static_cast<int>(e.lane), e.start, e.end - e.start,
                  static_cast<unsigned long long>(e.bytes),
                  static_cast<long long>(e.step));
    json += "{\"name\": \"" + escape(e.name) + "\", \"cat\": \"" + e.category +
            "\", " + numbers + (i + 1 < events_.size() ? ",\n" : "\n");
  }
  json += "]}\n";
  return writeFileAtomically(path, json.data(), json.size(), error);
}

} // namespace strata::runtime
