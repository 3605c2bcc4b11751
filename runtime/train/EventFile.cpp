// EventFile.cpp - TensorBoard event files of a training run.

#include "runtime/train/EventFile.h"

#include "runtime/support/Crc32c.h"
#include "runtime/support/FileUtil.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <unistd.h>

namespace strata::trainer {

namespace {

void varint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

template <typename T> void fixed(std::string &out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T)); // Little-endian, as protobuf's.
  out.append(bytes, sizeof(T));
}

/// A length-delimited field (wire type 2).
void bytesField(std::string &out, int field, const std::string &bytes) {
  varint(out, static_cast<uint64_t>(field) << 3 | 2);
  varint(out, bytes.size());
  out += bytes;
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

uint32_t EventFile::maskedCrc(const std::string &bytes) {
  uint32_t crc = crc32c(bytes.data(), bytes.size());
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string EventFile::record(const std::string &data) {
  std::string out, length;
  fixed<uint64_t>(length, data.size());
  out = length;
  fixed<uint32_t>(out, maskedCrc(length));
  out += data;
  fixed<uint32_t>(out, maskedCrc(data));
  return out;
}

std::string
EventFile::event(double wallTime, int64_t step, const std::string &fileVersion,
                 const std::vector<std::pair<std::string, double>> &values) {
  // tensorflow.Event: wall_time = 1 (double), step = 2 (int64),
  // file_version = 3 (string), summary = 5 (Summary). Summary: value = 1
  // (repeated Value). Value: tag = 1 (string), simple_value = 2 (float).
  std::string out;
  varint(out, 1 << 3 | 1);
  fixed<double>(out, wallTime);
  if (step != 0) {
    varint(out, 2 << 3 | 0);
    varint(out, static_cast<uint64_t>(step));
  }
  if (!fileVersion.empty())
    bytesField(out, 3, fileVersion);
  if (!values.empty()) {
    std::string summary;
    for (const auto &[tag, value] : values) {
      std::string v;
      bytesField(v, 1, tag);
      varint(v, 2 << 3 | 5);
      fixed<float>(v, static_cast<float>(value));
      bytesField(summary, 1, v);
    }
    bytesField(out, 5, summary);
  }
  return out;
}

EventFile::~EventFile() {
  if (file_)
    std::fclose(file_);
}

bool EventFile::open(const std::string &dir, std::string &error) {
  if (!makeDirectories(dir, error))
    return false;
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  host[sizeof(host) - 1] = '\0';
  // The time and the process id keep two runs (a resume) apart.
  path_ = dir + "/events.out.tfevents." +
          std::to_string(static_cast<int64_t>(now())) + "." + host + "." +
          std::to_string(::getpid()) + ".strata";
  file_ = std::fopen(path_.c_str(), "wbx");
  if (!file_) {
    error = "cannot create the TensorBoard event file '" + path_ +
            "': " + std::strerror(errno);
    return false;
  }
  return write(event(now(), 0, "brain.Event:2", {}), error);
}

bool EventFile::write(const std::string &data, std::string &error) {
  std::string r = record(data);
  if (std::fwrite(r.data(), 1, r.size(), file_) != r.size() ||
      std::fflush(file_) != 0) {
    error = "cannot write the TensorBoard event file '" + path_ +
            "': " + std::strerror(errno);
    return false;
  }
  return true;
}

bool EventFile::scalars(
    int64_t step, const std::vector<std::pair<std::string, double>> &values,
    std::string &error) {
  if (!file_) {
    error = "the TensorBoard event file is not open";
    return false;
  }
  return write(event(now(), step, "", values), error);
}

bool EventFile::close(std::string &error) {
  if (!file_)
    return true;
  bool ok = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok)
    error = "cannot write the TensorBoard event file '" + path_ +
            "': " + std::strerror(errno);
  return ok;
}

} // namespace strata::trainer
