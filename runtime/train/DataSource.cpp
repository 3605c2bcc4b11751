// DataSource.cpp - Token batches for training steps.

#include "runtime/train/DataSource.h"
#include "runtime/support/FileUtil.h"
#include "runtime/support/Npy.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

namespace strata::trainer {

namespace {

/// A .npy of int32/int64 rows [N > 0, seq + 1], as int64.
bool readRows(const std::string &path, const char *what, int64_t batch,
              int64_t seq, std::vector<int64_t> &out, std::string &error) {
  npy::Array array;
  if (!npy::readFile(path, array, error))
    return false;
  if (array.dtype != DType::I64 && array.dtype != DType::I32) {
    error = std::string(what) + " '" + path +
            "' must be int32 or int64, it is " + dtypeName(array.dtype);
    return false;
  }
  if (array.shape.size() != 2 || array.shape[1] != seq + 1) {
    error = std::string(what) + " '" + path + "' must have shape [N, " +
            std::to_string(seq + 1) +
            "] (rows of T+1 tokens for T = " + std::to_string(seq) +
            "), it has " + npy::shapeString(array.shape);
    return false;
  }
  if (array.shape[0] == 0) {
    error = std::string(what) + " '" + path + "' has no rows";
    return false;
  }
  out.resize(array.numElements());
  for (int64_t i = 0; i < array.numElements(); ++i) {
    if (array.dtype == DType::I64)
      std::memcpy(&out[i], array.data.data() + 8 * i, 8);
    else {
      int32_t v;
      std::memcpy(&v, array.data.data() + 4 * i, 4);
      out[i] = v;
    }
  }
  return true;
}

} // namespace

bool DataSource::open(const std::string &path, int64_t batch, int64_t seq,
                      std::string &error) {
  batch_ = batch;
  seq_ = seq;
  auto endsWith = [&](const char *suffix) {
    size_t n = std::strlen(suffix);
    return path.size() >= n && path.compare(path.size() - n, n, suffix) == 0;
  };
  if (endsWith(".bin")) {
    uint64_t size = 0;
    UniqueFd fd = openRegularFile(path, "data", size, error);
    if (fd.get() < 0)
      return false;
    std::vector<char> bytes(size);
    if (!preadAll(fd.get(), bytes.data(), size, 0)) {
      error = "cannot read data '" + path + "': " + std::strerror(errno);
      return false;
    }
    if (bytes.size() % 2 != 0) {
      error = "data '" + path +
              "' has an odd number of bytes; a .bin is a "
              "stream of uint16 tokens";
      return false;
    }
    tokens_.resize(bytes.size() / 2);
    for (size_t i = 0; i < tokens_.size(); ++i) {
      uint16_t t;
      std::memcpy(&t, bytes.data() + 2 * i, 2);
      tokens_[i] = t;
    }
    stream_ = true;
    rows_ = tokens_.size() > 1
                ? (static_cast<int64_t>(tokens_.size()) - 1) / seq
                : 0;
    if (rows_ == 0) {
      error = "data '" + path + "' has " + std::to_string(tokens_.size()) +
              " tokens, fewer than one window of " + std::to_string(seq + 1);
      return false;
    }
    description_ = std::to_string(tokens_.size()) + " tokens (" +
                   std::to_string(rows_) + " windows of " +
                   std::to_string(seq + 1) + ")";
    return true;
  }
  if (!readRows(path, "data", batch, seq, tokens_, error))
    return false;
  rows_ = static_cast<int64_t>(tokens_.size()) / (seq + 1);
  // A token id is never negative (an index from the end to a gather, an
  // ignored position to the loss): refuse the data rather than guess.
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (tokens_[i] < 0) {
      error = "data '" + path + "' holds the negative token id " +
              std::to_string(tokens_[i]) + " at row " +
              std::to_string(i / (seq + 1)) + ", column " +
              std::to_string(i % (seq + 1));
      return false;
    }
  description_ =
      std::to_string(rows_) + " rows of " + std::to_string(seq + 1) + " tokens";
  return true;
}

int64_t DataSource::token(int64_t row, int64_t col) const {
  if (stream_)
    return tokens_[row * seq_ + col];
  return tokens_[row * (seq_ + 1) + col];
}

bool DataSource::readAligned(const std::string &path, const char *what,
                             std::vector<int64_t> &out, std::string &error) {
  if (stream_ || tokens_.empty()) {
    error = std::string("--") + what +
            " needs --data as .npy rows (a token stream has no rows to "
            "align them with)";
    return false;
  }
  if (!readRows(path, what, batch_, seq_, out, error))
    return false;
  int64_t rows = static_cast<int64_t>(out.size()) / (seq_ + 1);
  if (rows != rows_) {
    error = std::string(what) + " '" + path + "' have " + std::to_string(rows) +
            " rows, the data " + std::to_string(rows_) + ": one row of " +
            what + " per row of tokens";
    out.clear();
    return false;
  }
  return true;
}

bool DataSource::openLabels(const std::string &path, std::string &error) {
  if (!readAligned(path, "labels", labels_, error))
    return false;
  int64_t used = 0;
  for (int64_t v : labels_)
    used += v >= 0;
  description_ += ", labels from " + path + " (" + std::to_string(used) +
                  " of " + std::to_string(labels_.size()) + " in the loss)";
  return true;
}

bool DataSource::openSegments(const std::string &path, std::string &error) {
  if (!readAligned(path, "segments", segments_, error))
    return false;
  int64_t examples = 0;
  for (int64_t r = 0; r < rows_; ++r)
    for (int64_t t = 0; t <= seq_; ++t) {
      int64_t v = segments_[r * (seq_ + 1) + t];
      if (v < -1) {
        error = "segments '" + path + "' hold " + std::to_string(v) +
                " at row " + std::to_string(r) + ", column " +
                std::to_string(t) +
                ": an example's number (from 0) or -1 (padding)";
        segments_.clear();
        return false;
      }
      examples += v >= 0 && (t == 0 || segments_[r * (seq_ + 1) + t - 1] != v);
    }
  description_ += ", " + std::to_string(examples) + " examples packed";
  return true;
}

void DataSource::shuffle(uint64_t seed) {
  shuffled_ = true;
  seed_ = seed;
  permEpoch_ = -1;
}

int64_t DataSource::rowOf(int64_t i) const {
  if (!shuffled_)
    return i % rows_;
  int64_t epoch = i / rows_;
  if (epoch != permEpoch_) {
    // Fisher-Yates driven by splitmix64 of (seed, epoch): no library RNG,
    // whose sequence may differ between standard libraries.
    uint64_t state =
        seed_ ^ (static_cast<uint64_t>(epoch) * 0x9e3779b97f4a7c15ull);
    auto next = [&state] {
      uint64_t z = (state += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      return z ^ (z >> 31);
    };
    perm_.resize(rows_);
    for (int64_t r = 0; r < rows_; ++r)
      perm_[r] = r;
    for (int64_t r = rows_ - 1; r > 0; --r)
      std::swap(perm_[r], perm_[next() % static_cast<uint64_t>(r + 1)]);
    permEpoch_ = epoch;
  }
  return perm_[i % rows_];
}

void DataSource::fill(int64_t b, int64_t row, std::vector<int64_t> &inputs,
                      std::vector<int64_t> &labels, bool next,
                      std::vector<int64_t> *segments,
                      std::vector<int64_t> *positions) const {
  bool pad = row < 0;
  int64_t from = pad ? 0 : row, shift = next ? 1 : 0;
  int64_t count = 0;
  for (int64_t t = 0; t < seq_; ++t) {
    inputs[b * seq_ + t] = token(from, t);
    labels[b * seq_ + t] = pad ? -100
                           : labels_.empty()
                               ? token(from, t + shift)
                               : labels_[from * (seq_ + 1) + t + shift];
    if (segments) {
      int64_t s = pad ? -1 : segments_[from * (seq_ + 1) + t];
      if (t > 0 && s != (*segments)[b * seq_ + t - 1])
        count = 0;
      (*segments)[b * seq_ + t] = s;
      (*positions)[b * seq_ + t] = count++;
    }
  }
}

void DataSource::size(std::vector<int64_t> &inputs,
                      std::vector<int64_t> &labels,
                      std::vector<int64_t> *&segments,
                      std::vector<int64_t> *&positions) const {
  inputs.resize(batch_ * seq_);
  labels.resize(batch_ * seq_);
  if (segments_.empty())
    segments = positions = nullptr;
  if (segments) {
    segments->resize(batch_ * seq_);
    positions->resize(batch_ * seq_);
  }
}

void DataSource::batch(int64_t step, std::vector<int64_t> &inputs,
                       std::vector<int64_t> &labels, bool next,
                       std::vector<int64_t> *segments,
                       std::vector<int64_t> *positions) const {
  size(inputs, labels, segments, positions);
  for (int64_t b = 0; b < batch_; ++b)
    fill(b, rowOf(step * batch_ + b), inputs, labels, next, segments,
         positions);
}

int64_t DataSource::evalBatch(int64_t k, std::vector<int64_t> &inputs,
                              std::vector<int64_t> &labels, bool next,
                              std::vector<int64_t> *segments,
                              std::vector<int64_t> *positions) const {
  size(inputs, labels, segments, positions);
  for (int64_t b = 0; b < batch_; ++b) {
    int64_t row = k * batch_ + b;
    fill(b, row < rows_ ? row : -1, inputs, labels, next, segments, positions);
  }
  int64_t kept = 0;
  for (int64_t v : labels)
    kept += v >= 0;
  return kept;
}

} // namespace strata::trainer
