// Safetensors.cpp - Writing weights in HuggingFace's safetensors format.

#include "runtime/support/Safetensors.h"

#include "runtime/support/Checked.h"
#include "runtime/support/FileUtil.h"
#include "runtime/support/Json.h"

#include <cstdio>
#include <set>

namespace strata::safetensors {

bool Tensor::bytes(uint64_t &out) const {
  std::optional<uint64_t> n = checkedByteSize(shape, dtypeSize(dtype));
  if (!n)
    return false;
  out = *n;
  return true;
}

const char *dtypeCode(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::F64:
    return "F64";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I64:
    return "I64";
  case DType::I32:
    return "I32";
  case DType::I16:
    return "I16";
  case DType::I8:
    return "I8";
  case DType::U8:
    return "U8";
  case DType::U16:
    return "U16";
  case DType::U32:
    return "U32";
  case DType::U64:
    return "U64";
  case DType::Bool:
    return "BOOL";
  }
  return "?";
}

bool header(const std::vector<const Tensor *> &tensors, std::string &out,
            std::string &error) {
  out = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  for (const Tensor *t : tensors) {
    uint64_t n = 0;
    if (!t->bytes(n)) {
      error = "tensor '" + t->name + "' has an invalid or oversized shape";
      return false;
    }
    if (!isValidDType(static_cast<uint8_t>(t->dtype))) {
      error = "tensor '" + t->name + "' has no valid element type";
      return false;
    }
    out += "," + json::quote(t->name) + ":{\"dtype\":\"" + dtypeCode(t->dtype) +
           "\",\"shape\":[";
    for (size_t i = 0; i < t->shape.size(); ++i)
      out += (i ? "," : "") + std::to_string(t->shape[i]);
    out += "],\"data_offsets\":[" + std::to_string(offset) + "," +
           std::to_string(offset + n) + "]}";
    offset += n;
  }
  out += "}";
  // The data starts 8-byte aligned; the format allows trailing spaces.
  out.append((8 - out.size() % 8) % 8, ' ');
  return true;
}

namespace {

/// Writes one file: length, header, each tensor read in turn.
bool writeFile(const std::string &path,
               const std::vector<const Tensor *> &tensors, std::string &error) {
  std::string head;
  if (!header(tensors, head, error))
    return false;
  unsigned char length[8];
  uint64_t h = head.size();
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(h >> (8 * i));
  AtomicFileWriter out;
  if (!out.open(path, error) || !out.write(length, 8, error) ||
      !out.write(head.data(), head.size(), error))
    return false;
  std::string bytes;
  for (const Tensor *t : tensors) {
    uint64_t n = 0;
    t->bytes(n);
    bytes.clear();
    if (!t->read(bytes, error)) {
      error = "reading tensor '" + t->name + "' for " + path + ": " + error;
      return false;
    }
    if (bytes.size() != n) {
      error = "tensor '" + t->name + "' has " + std::to_string(bytes.size()) +
              " bytes, its shape and type need " + std::to_string(n);
      return false;
    }
    if (!out.write(bytes.data(), bytes.size(), error))
      return false;
  }
  return out.commit(error);
}

} // namespace

bool writeModel(const std::string &dir, const std::vector<Tensor> &tensors,
                uint64_t maxShardBytes, WriteResult &result,
                std::string &error) {
  result = WriteResult();
  if (tensors.empty()) {
    error = "no tensors to write";
    return false;
  }
  std::set<std::string> names;
  std::vector<std::vector<const Tensor *>> shards(1);
  uint64_t shardBytes = 0;
  for (const Tensor &t : tensors) {
    if (t.name.empty() || !names.insert(t.name).second) {
      error = t.name.empty() ? "a tensor has an empty name"
                             : "two tensors are named '" + t.name + "'";
      return false;
    }
    uint64_t n = 0;
    if (!t.bytes(n)) {
      error = "tensor '" + t.name + "' has an invalid or oversized shape";
      return false;
    }
    if (!shards.back().empty() && shardBytes + n > maxShardBytes) {
      shards.emplace_back();
      shardBytes = 0;
    }
    shards.back().push_back(&t);
    shardBytes += n;
    result.totalBytes += n;
  }
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  bool sharded = shards.size() > 1;
  const std::string &other = sharded ? single : index;
  if (pathExists(other)) {
    error = other + " is left from an earlier export and would " +
            (sharded ? "shadow" : "contradict") +
            " this one's files for from_pretrained; remove it or export "
            "into another directory";
    return false;
  }
  if (!makeDirectories(dir, error))
    return false;
  if (!sharded) {
    if (!writeFile(single, shards[0], error))
      return false;
    result.files.push_back(single);
    return true;
  }
  std::string map;
  for (size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", s + 1,
                  shards.size());
    std::string path = dir + "/" + name;
    if (!writeFile(path, shards[s], error))
      return false;
    result.files.push_back(path);
    for (const Tensor *t : shards[s])
      map += std::string(map.empty() ? "" : ",\n") + "    " +
             json::quote(t->name) + ": " + json::quote(name);
  }
  std::string text = "{\n  \"metadata\": {\"total_size\": " +
                     std::to_string(result.totalBytes) +
                     "},\n  \"weight_map\": {\n" + map + "\n  }\n}\n";
  if (!writeFileAtomically(index, text.data(), text.size(), error))
    return false;
  result.files.push_back(index);
  return true;
}

} // namespace strata::safetensors
