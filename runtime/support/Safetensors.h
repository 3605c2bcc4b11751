// Safetensors.h - Writing weights in HuggingFace's safetensors format.
//
// A file is an 8-byte little-endian header length, a JSON header naming
// each tensor's dtype, shape and byte range, and the tensors' bytes back to
// back (https://huggingface.co/docs/safetensors). A model over the shard
// size is split as transformers' save_pretrained splits it:
// model-00001-of-0000N.safetensors and a model.safetensors.index.json
// mapping every tensor to its file, so from_pretrained loads either.
//
// Tensors are read one at a time through a callback, so a model larger
// than memory is written without holding it; every file goes through a
// temporary and a rename, the index last.

#ifndef STRATA_RUNTIME_SUPPORT_SAFETENSORS_H
#define STRATA_RUNTIME_SUPPORT_SAFETENSORS_H

#include "runtime/support/DType.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace strata::safetensors {

struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Fills `bytes` with exactly bytes() bytes of the tensor, densely packed
  /// in row-major order; false with `error` set.
  std::function<bool(std::string &bytes, std::string &error)> read;

  /// The tensor's size: elements times the dtype's size (checked: false on
  /// an overflow or a negative dimension).
  bool bytes(uint64_t &out) const;
};

/// safetensors' name of `dtype` ("F32", "BF16", "I64", "BOOL", ...).
const char *dtypeCode(DType dtype);

/// The JSON header of one file holding `tensors` in order (offsets from the
/// start of the data), with `metadata` {"format": "pt"}, padded with spaces
/// to a multiple of 8 bytes. False with `error` on a bad tensor.
bool header(const std::vector<const Tensor *> &tensors, std::string &out,
            std::string &error);

struct WriteResult {
  /// The files written, in order (the index last, when there is one).
  std::vector<std::string> files;
  uint64_t totalBytes = 0;
};

/// Writes `tensors` into the directory `dir` (created if missing) as
/// model.safetensors, or, when they take more than `maxShardBytes`, as
/// shards of at most that much (a tensor larger than it gets a shard of its
/// own) with an index. Names must be unique and non-empty. Refuses (before
/// writing anything) when `dir` holds the other layout's entry point from
/// an earlier export (model.safetensors beside a new index would shadow it,
/// and the other way round mislead), naming it.
bool writeModel(const std::string &dir, const std::vector<Tensor> &tensors,
                uint64_t maxShardBytes, WriteResult &result,
                std::string &error);

} // namespace strata::safetensors

#endif // STRATA_RUNTIME_SUPPORT_SAFETENSORS_H
