// EventFile.h - TensorBoard event files of a training run.
//
// strata-run --tensorboard DIR writes the scalars HuggingFace's Trainer
// logs (train/loss, train/learning_rate, train/grad_norm, ...) where
// TensorBoard reads them: a file events.out.tfevents.TIME.HOST.PID in DIR
// of TFRecord records (a length, its masked CRC-32C, the bytes, their
// masked CRC-32C), each a tensorflow.Event protobuf: the first one naming
// the file version, then one per scalar value with its wall time and step.
// The protobuf is encoded here (five fields of two messages): the runtime
// links no protobuf library.

#ifndef STRATA_RUNTIME_TRAIN_EVENTFILE_H
#define STRATA_RUNTIME_TRAIN_EVENTFILE_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace strata::trainer {

class EventFile {
public:
  EventFile() = default;
  EventFile(const EventFile &) = delete;
  EventFile &operator=(const EventFile &) = delete;
  ~EventFile();

  /// Creates `dir` if needed and a new event file in it (a resumed run
  /// gets a file of its own; TensorBoard reads them all).
  bool open(const std::string &dir, std::string &error);
  bool isOpen() const { return file_ != nullptr; }
  const std::string &path() const { return path_; }
  /// One event of `step` holding each (tag, value), flushed.
  bool scalars(int64_t step,
               const std::vector<std::pair<std::string, double>> &values,
               std::string &error);
  bool close(std::string &error);

  /// The encodings, for the tests.
  static std::string record(const std::string &data);
  static std::string
  event(double wallTime, int64_t step, const std::string &fileVersion,
        const std::vector<std::pair<std::string, double>> &values);
  static uint32_t maskedCrc(const std::string &bytes);

private:
  bool write(const std::string &data, std::string &error);

  std::string path_;
  FILE *file_ = nullptr;
};

} // namespace strata::trainer

#endif // STRATA_RUNTIME_TRAIN_EVENTFILE_H
