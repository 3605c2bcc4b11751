// DataSource.h - Token batches for training steps.

#ifndef STRATA_RUNTIME_TRAIN_DATASOURCE_H
#define STRATA_RUNTIME_TRAIN_DATASOURCE_H

#include <cstdint>
#include <string>
#include <vector>

namespace strata::trainer {

/// Training data: rows of T+1 tokens. Step k uses rows k*B .. k*B+B-1
/// (wrapping around); the input is row[:T] and the labels row[1:].
///
/// * `.npy`: int32 or int64 of shape [N, T+1], one row per sample.
/// * `.bin`: a flat stream of uint16 tokens (the nanoGPT convention), cut
///   into windows of T+1 tokens that start every T tokens.
class DataSource {
public:
  /// Opens `path` for batches of `batch` rows of `seq` tokens.
  bool open(const std::string &path, int64_t batch, int64_t seq,
            std::string &error);
  /// Takes the labels from `path` instead of the tokens: a .npy of the
  /// data's shape [N, T+1], row for row, as HuggingFace datasets give them
  /// (aligned with the tokens, negative where a position is left out of
  /// the loss: -100 for a prompt, padding). Only after open() of .npy data.
  bool openLabels(const std::string &path, std::string &error);

  /// The segment ids of packed rows (strata.data.pack_rows: each
  /// example of a row a number, padding -1), a .npy of the data's shape.
  bool openSegments(const std::string &path, std::string &error);
  bool hasSegments() const { return !segments_.empty(); }

  /// Fills `inputs` (tokens 0..T-1 of each row) and `labels` (batch*seq
  /// each) for step `step` (0-based): positions 1..T of the labels (the
  /// next tokens, `next`), or 0..T-1 (for a model that shifts them itself).
  /// With segments, `segments` and `positions` (each segment counting
  /// from 0) of tokens 0..T-1 too.
  void batch(int64_t step, std::vector<int64_t> &inputs,
             std::vector<int64_t> &labels, bool next = true,
             std::vector<int64_t> *segments = nullptr,
             std::vector<int64_t> *positions = nullptr) const;
  bool hasLabels() const { return !labels_.empty(); }
  /// Takes the rows in a new order each epoch (an epoch: every row once),
  /// the same on every machine for a seed: batch(step) depends on the step
  /// alone, so a resumed run continues where it stopped.
  void shuffle(uint64_t seed);

  /// For evaluation, every row once: batches of `batch` rows in order, the
  /// last one filled up with rows whose labels are all ignored (-100).
  /// Returns how many labels of batch `k` count (are not negative).
  int64_t evalBatches() const { return (rows_ + batch_ - 1) / batch_; }
  int64_t evalBatch(int64_t k, std::vector<int64_t> &inputs,
                    std::vector<int64_t> &labels, bool next = true,
                    std::vector<int64_t> *segments = nullptr,
                    std::vector<int64_t> *positions = nullptr) const;

  int64_t rows() const { return rows_; }
  const std::string &description() const { return description_; }

private:
  int64_t token(int64_t row, int64_t col) const;
  /// The row of sample `i` (from 0, across epochs).
  int64_t rowOf(int64_t i) const;
  /// Sizes a batch's vectors; nulls `segments` and `positions` without
  /// segments.
  void size(std::vector<int64_t> &inputs, std::vector<int64_t> &labels,
            std::vector<int64_t> *&segments,
            std::vector<int64_t> *&positions) const;
  /// Row `row` (-1: a padding row) as batch entry `b`.
  void fill(int64_t b, int64_t row, std::vector<int64_t> &inputs,
            std::vector<int64_t> &labels, bool next,
            std::vector<int64_t> *segments,
            std::vector<int64_t> *positions) const;
  /// A .npy of rows [rows_, seq_ + 1] beside the data's (`what` for
  /// messages).
  bool readAligned(const std::string &path, const char *what,
                   std::vector<int64_t> &out, std::string &error);

  std::vector<int64_t> tokens_;   // Npy: rows_ x (seq_ + 1). Bin: the stream.
  std::vector<int64_t> labels_;   // rows_ x (seq_ + 1), when given.
  std::vector<int64_t> segments_; // rows_ x (seq_ + 1), when given.
  bool shuffled_ = false;
  uint64_t seed_ = 0;
  /// The permutation of epoch `permEpoch_`, made when first needed.
  mutable std::vector<int64_t> perm_;
  mutable int64_t permEpoch_ = -1;
  bool stream_ = false;
  int64_t rows_ = 0;
  int64_t batch_ = 0;
  int64_t seq_ = 0;
  std::string description_;
};

} // namespace strata::trainer

#endif // STRATA_RUNTIME_TRAIN_DATASOURCE_H
