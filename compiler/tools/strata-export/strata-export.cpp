//===- strata-export.cpp - Trained weights back into the ONNX model -------===//
//
//   strata-export model.strata -o finetuned.onnx [--checkpoint FILE]
//   strata-export model.strata --format safetensors -o DIR [--names MAP.json]
//
// Writes the model the artifact was compiled from with every parameter's
// initializer replaced by its trained value (same names, same types). Large
// models, and models that came with external data, get their tensors in an
// external data file next to the output (4 KiB-aligned), so the output is
// loadable by any ONNX runtime and never a >2 GiB protobuf.
//
// --format safetensors writes the weights alone, as transformers'
// save_pretrained does (model.safetensors, or shards with an index), under
// the names --names maps them to (the model's own parameter names; the
// Python helper strata.hf.save_pretrained writes that map).
//
//===----------------------------------------------------------------------===//

#include "compiler/import/OnnxProto.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/support/Checked.h"
#include "runtime/support/FileUtil.h"
#include "runtime/support/Half.h"
#include "runtime/support/Json.h"
#include "runtime/support/Safetensors.h"
#include "runtime/support/Size.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Trainer.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sys/stat.h>
#include <tuple>

using namespace strata;

namespace {

struct Options {
  std::string artifact, output, checkpoint, model;
  std::string format = "onnx", names;
  /// transformers' default max_shard_size ("5GB").
  uint64_t maxShardBytes = 5000000000ull;
  bool externalData = false;
  /// Half-precision initializers trained as fp32 masters stay fp32, read
  /// through a Cast to the model's type.
  bool fp32Masters = false;
};

void usage(FILE *out) {
  std::fprintf(out,
               "usage: strata-export ARTIFACT -o OUT.onnx [options]\n"
               "       strata-export ARTIFACT --format safetensors -o DIR "
               "[options]\n\n"
               "Writes the source ONNX model with its initializers replaced "
               "by the trained values,\n"
               "or the weights alone as safetensors for HuggingFace's "
               "from_pretrained.\n\n"
               "options:\n"
               "  --format F         onnx (default) or safetensors: "
               "DIR/model.safetensors, or\n"
               "                     shards and model.safetensors.index.json "
               "over the shard size\n"
               "  --names FILE       safetensors: a JSON object mapping "
               "initializer names to the\n"
               "                     names to save them under; only those "
               "are written (default:\n"
               "                     every initializer but the exporter's "
               "own, named with '::'\n"
               "                     or a leading '/', under its own name)\n"
               "  --max-shard-size S safetensors: bytes per file (default "
               "5GB, as transformers)\n"
               "  --checkpoint FILE  trained state to export (default: "
               "ARTIFACT/checkpoint/checkpoint.bin;\n"
               "                     without one, the initial values)\n"
               "  --model FILE       the source model, if it moved since "
               "compilation\n"
               "  --external-data    always put tensors in OUT.onnx.data\n"
               "  --fp32-masters     write fp16/bf16 parameters as their fp32 "
               "masters,\n"
               "                     each read through a Cast to the model's "
               "type (default:\n"
               "                     rounded to the model's own type)\n");
}

std::string baseOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void clearData(::onnx::TensorProto &t) {
  t.clear_raw_data();
  t.clear_float_data();
  t.clear_double_data();
  t.clear_int32_data();
  t.clear_int64_data();
  t.clear_uint64_data();
  t.clear_external_data();
  t.set_data_location(::onnx::TensorProto_DataLocation_DEFAULT);
}

/// The ONNX type a trained parameter is written as: the initializer's own
/// (`onnxType`), except an fp16/bf16 one trained as an fp32 master and kept
/// so (`keepMasters`), which is float.
int exportedType(DType trained, int onnxType, bool keepMasters) {
  bool low = onnxType == ::onnx::TensorProto_DataType_FLOAT16 ||
             onnxType == ::onnx::TensorProto_DataType_BFLOAT16;
  return trained == DType::F32 && low && keepMasters
             ? ::onnx::TensorProto_DataType_FLOAT
             : onnxType;
}

/// The trained value of initializer `t` (parameter `p`) in `bytes`, of the
/// ONNX type `type`: the model's own, fp32 masters of fp16/bf16
/// initializers rounded to it (or kept fp32 with `keepMasters`). False with
/// `error` on a diverged value or a type that does not convert.
/// A sharded parameter (--shard-parameters) is read whole: from every
/// rank's file of the checkpoint (`shards`), or without one its initial
/// value.
bool trainedValue(artifact::Artifact &art, const artifact::ParamEntry &p,
                  const ::onnx::TensorProto &t, bool keepMasters,
                  const trainer::ShardedCheckpoint *shards, std::string &bytes,
                  int &type, std::string &error) {
  const artifact::Slot &slot = art.plan().slots[p.slot];
  bool sharded = p.flags & artifact::ParamEntry::Sharded;
  int64_t n =
      checkedNumElements(std::vector<int64_t>(t.dims().begin(), t.dims().end()))
          .value_or(-1);
  int64_t have = sharded ? checkedNumElements(p.wholeShape).value_or(-1)
                         : slot.numElements();
  if (n != have) {
    error = "initializer '" + t.name() + "' has " + std::to_string(n) +
            " elements in the source model, " + std::to_string(have) +
            " in the artifact";
    return false;
  }
  if (sharded) {
    std::vector<char> whole;
    if (shards ? !shards->readWhole(art.plan(), p, whole, error)
               : !art.readInitial(p, whole, error))
      return false;
    bytes.assign(whole.begin(), whole.end());
  } else {
    bytes.resize(p.bytes);
    if (!art.readSlot(slot, bytes.data(), error))
      return false;
  }
  // A diverged run must not pass for a trained model.
  if (slot.dtype == DType::F32)
    for (size_t k = 0; k + 4 <= bytes.size(); k += 4) {
      float v;
      std::memcpy(&v, bytes.data() + k, 4);
      if (!std::isfinite(v)) {
        error = "parameter '" + t.name() +
                "' holds a non-finite value "
                "(element " +
                std::to_string(k / 4) + " is " + std::to_string(v) +
                "); the run diverged, export an earlier checkpoint";
        return false;
      }
    }
  // An fp16 or bf16 initializer trained as an fp32 master (see
  // --strata-autocast) goes back in the model's own type, rounded to
  // nearest; any other difference would be a corrupt model.
  int want = t.data_type();
  bool half = want == ::onnx::TensorProto_DataType_FLOAT16,
       brain = want == ::onnx::TensorProto_DataType_BFLOAT16;
  DType d = slot.dtype;
  type = exportedType(d, want, keepMasters);
  if (type != want)
    return true; // Kept as the fp32 master.
  if (d == DType::F32 && (half || brain)) {
    size_t count = bytes.size() / 4;
    std::vector<float> wide(count);
    std::vector<uint16_t> narrow(count);
    std::memcpy(wide.data(), bytes.data(), count * 4);
    narrowFloats(wide.data(), narrow.data(), static_cast<int64_t>(count),
                 brain);
    bytes.assign(reinterpret_cast<const char *>(narrow.data()), count * 2);
  } else if ((want == ::onnx::TensorProto_DataType_FLOAT && d != DType::F32) ||
             (want == ::onnx::TensorProto_DataType_DOUBLE && d != DType::F64) ||
             (half && d != DType::F16) || (brain && d != DType::BF16)) {
    error = "initializer '" + t.name() + "' is " +
            ::onnx::TensorProto_DataType_Name(want) +
            " in the source model; the artifact holds " +
            std::string(dtypeName(d)) + " values that do not convert to it";
    return false;
  }
  return true;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "strata-export: error: %s\n", message.c_str());
  return 1;
}

/// The element type of an ONNX tensor type; false for those safetensors
/// has no name for (strings, complex, float8).
bool dtypeOfOnnx(int type, DType &out) {
  switch (type) {
  case ::onnx::TensorProto_DataType_FLOAT:
    out = DType::F32;
    return true;
  case ::onnx::TensorProto_DataType_DOUBLE:
    out = DType::F64;
    return true;
  case ::onnx::TensorProto_DataType_FLOAT16:
    out = DType::F16;
    return true;
  case ::onnx::TensorProto_DataType_BFLOAT16:
    out = DType::BF16;
    return true;
  case ::onnx::TensorProto_DataType_INT64:
    out = DType::I64;
    return true;
  case ::onnx::TensorProto_DataType_INT32:
    out = DType::I32;
    return true;
  case ::onnx::TensorProto_DataType_INT16:
    out = DType::I16;
    return true;
  case ::onnx::TensorProto_DataType_INT8:
    out = DType::I8;
    return true;
  case ::onnx::TensorProto_DataType_UINT8:
    out = DType::U8;
    return true;
  case ::onnx::TensorProto_DataType_UINT16:
    out = DType::U16;
    return true;
  case ::onnx::TensorProto_DataType_UINT32:
    out = DType::U32;
    return true;
  case ::onnx::TensorProto_DataType_UINT64:
    out = DType::U64;
    return true;
  case ::onnx::TensorProto_DataType_BOOL:
    out = DType::Bool;
    return true;
  default:
    return false;
  }
}

/// An initializer the exporter made rather than the model declared (a
/// folded constant, a shape): torch.onnx names them "onnx::Op_12" or after
/// the node path ("/model/Constant_output_0").
bool exporterMade(const std::string &name) {
  return name.find("::") != std::string::npos ||
         (!name.empty() && name[0] == '/');
}

/// --format safetensors: the initializers chosen (by --names, or all but
/// the exporter's), each with its trained value when it is a parameter,
/// under its saved name.
int writeSafetensors(
    const Options &options, artifact::Artifact &art,
    const ::onnx::ModelProto &model, const std::string &baseDir,
    const std::map<std::string, const artifact::ParamEntry *> &params,
    const trainer::ShardedCheckpoint *shards) {
  std::string error;
  // Initializer name -> saved name, in the model's order.
  std::map<std::string, std::string> rename;
  bool all = options.names.empty();
  if (!all) {
    std::string text;
    json::Value map;
    if (!readRegularFile(options.names, "--names file", 1ull << 30, text,
                         error))
      return fail(error);
    if (!json::parse(text, map, error))
      return fail(options.names + ": " + error);
    if (!map.isObject())
      return fail(options.names +
                  ": must be a JSON object mapping initializer names to the "
                  "names to save them under");
    std::set<std::string> initializers, saved;
    for (const auto &t : model.graph().initializer())
      initializers.insert(t.name());
    for (const auto &[from, to] : map.members) {
      if (!to.isString() || to.string.empty())
        return fail(options.names + ": the name for '" + from +
                    "' must be a non-empty string");
      if (!initializers.count(from))
        return fail(options.names + ": '" + from +
                    "' is no initializer of the model");
      if (!saved.insert(to.string).second)
        return fail(options.names + ": two initializers are saved as '" +
                    to.string + "'");
      rename[from] = to.string;
    }
  }
  std::vector<safetensors::Tensor> tensors;
  std::vector<std::string> lost;
  size_t trained = 0, skipped = 0;
  for (const ::onnx::TensorProto &t : model.graph().initializer()) {
    auto param = params.find(t.name());
    bool isParam = param != params.end();
    std::string name = t.name();
    if (!all) {
      auto it = rename.find(t.name());
      if (it == rename.end()) {
        if (isParam)
          lost.push_back(t.name());
        continue;
      }
      name = it->second;
    } else if (!isParam && exporterMade(t.name())) {
      ++skipped;
      continue;
    }
    int type = isParam
                   ? exportedType(art.plan().slots[param->second->slot].dtype,
                                  t.data_type(), options.fp32Masters)
                   : t.data_type();
    safetensors::Tensor out;
    out.name = name;
    out.shape.assign(t.dims().begin(), t.dims().end());
    if (!dtypeOfOnnx(type, out.dtype))
      return fail("initializer '" + t.name() + "' is " +
                  ::onnx::TensorProto_DataType_Name(t.data_type()) +
                  ", which safetensors cannot hold; leave it out of --names");
    const ::onnx::TensorProto *tensor = &t;
    if (isParam) {
      ++trained;
      const artifact::ParamEntry *p = param->second;
      out.read = [&art, p, tensor, &options, shards](std::string &bytes,
                                                     std::string &error) {
        int type = 0;
        return trainedValue(art, *p, *tensor, options.fp32Masters, shards,
                            bytes, type, error);
      };
    } else {
      out.read = [tensor, &baseDir](std::string &bytes, std::string &error) {
        strata::onnx::TensorData stored;
        if (!strata::onnx::readTensor(*tensor, baseDir, stored, error))
          return false;
        bytes.assign(stored.data, stored.size);
        return true;
      };
    }
    tensors.push_back(std::move(out));
  }
  // A trained parameter left out would be lost from the export.
  if (!lost.empty()) {
    std::string list;
    for (size_t i = 0; i < lost.size() && i < 5; ++i)
      list += (i ? ", '" : "'") + lost[i] + "'";
    return fail(std::to_string(lost.size()) + " trained parameter" +
                (lost.size() == 1 ? " is" : "s are") + " not in " +
                options.names + " (" + list + (lost.size() > 5 ? ", ..." : "") +
                "): the export would lose them");
  }
  if (trained != params.size())
    return fail(std::to_string(params.size() - trained) + " of " +
                std::to_string(params.size()) +
                " trained parameters have no initializer of the same name in "
                "the source model");
  safetensors::WriteResult result;
  if (!safetensors::writeModel(options.output, tensors, options.maxShardBytes,
                               result, error))
    return fail(error);
  std::fprintf(stderr,
               "strata-export: wrote %zu tensors (%zu trained, %s) in %zu "
               "file%s under %s%s\n",
               tensors.size(), trained, formatSize(result.totalBytes).c_str(),
               result.files.size(), result.files.size() == 1 ? "" : "s",
               options.output.c_str(),
               skipped ? (", leaving out " + std::to_string(skipped) +
                          " initializers the exporter made")
                             .c_str()
                       : "");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  strata::ignoreFileSizeSignal();
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "strata-export: error: %s needs a value\n",
                     arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    } else if (arg == "-o") {
      options.output = value();
    } else if (arg == "--checkpoint") {
      options.checkpoint = value();
    } else if (arg == "--model") {
      options.model = value();
    } else if (arg == "--external-data") {
      options.externalData = true;
    } else if (arg == "--fp32-masters") {
      options.fp32Masters = true;
    } else if (arg == "--format") {
      options.format = value();
      if (options.format != "onnx" && options.format != "safetensors") {
        std::fprintf(stderr,
                     "strata-export: error: unknown --format '%s' (onnx or "
                     "safetensors)\n",
                     options.format.c_str());
        return 2;
      }
    } else if (arg == "--names") {
      options.names = value();
    } else if (arg == "--max-shard-size") {
      std::string text = value();
      if (!parseSize(text, options.maxShardBytes) ||
          options.maxShardBytes == 0) {
        std::fprintf(stderr,
                     "strata-export: error: --max-shard-size needs a positive "
                     "size (5GB, 500MiB, ...), not '%s'\n",
                     text.c_str());
        return 2;
      }
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "strata-export: error: unknown option '%s'\n",
                   arg.c_str());
      usage(stderr);
      return 2;
    } else {
      options.artifact = arg;
    }
  }
  if (options.artifact.empty() || options.output.empty()) {
    usage(stderr);
    return 2;
  }

  std::string error;
  artifact::Artifact art;
  // Read-only: never touches the SSD store a training job may be using.
  if (!art.open(options.artifact, error, {},
                artifact::Artifact::Access::ReadOnly))
    return fail(error);
  const artifact::Plan &plan = art.plan();
  for (const artifact::ParamEntry &p : plan.params)
    if (p.flags & artifact::ParamEntry::Synthetic) {
      std::fprintf(stderr,
                   "strata-export: warning: '%s' was compiled with "
                   "--synthetic-params: its starting weights were generated, "
                   "not the source model's\n",
                   options.artifact.c_str());
      break;
    }
  std::string ckpt =
      options.checkpoint.empty()
          ? trainer::checkpointPath(options.artifact + "/checkpoint")
          : options.checkpoint;
  struct stat st;
  std::unique_ptr<trainer::ShardedCheckpoint> shards;
  if (::stat(ckpt.c_str(), &st) == 0) {
    trainer::CheckpointInfo info;
    if (!trainer::loadCheckpoint(ckpt, art, info, error))
      return fail(error);
    // Sharded parameters: each put together from every rank's file.
    bool shardedParams = false;
    for (const artifact::ParamEntry &p : plan.params)
      shardedParams |= (p.flags & artifact::ParamEntry::Sharded) != 0;
    if (shardedParams) {
      shards = std::make_unique<trainer::ShardedCheckpoint>();
      if (!shards->open(ckpt, error))
        return fail(error);
    }
    std::fprintf(stderr, "strata-export: weights after %llu steps (%s)\n",
                 static_cast<unsigned long long>(info.step), ckpt.c_str());
  } else if (!options.checkpoint.empty()) {
    return fail("cannot open checkpoint '" + ckpt + "'");
  } else {
    std::fprintf(stderr,
                 "strata-export: no checkpoint in %s; exporting "
                 "the initial weights\n",
                 options.artifact.c_str());
  }

  std::string source = options.model.empty() ? plan.sourceModel : options.model;
  ::onnx::ModelProto model;
  if (!strata::onnx::loadModelProto(source, model, error))
    return fail(error);
  // Another model's initializers could share names and shapes with this
  // one's (two exports of one family): only the graph's fingerprint tells.
  if (plan.sourceFingerprint != 0 &&
      strata::onnx::graphFingerprint(model) != plan.sourceFingerprint)
    return fail(source + " is not the model " + options.artifact +
                " was compiled from (" + plan.sourceModel +
                "): its graph differs (nodes, inputs, outputs or "
                "initializer names and shapes)");

  // Parameters (not constants, optimizer state or the low-precision
  // copies of mixed precision, which are the masters rounded) by name.
  std::map<std::string, const artifact::ParamEntry *> params;
  for (const artifact::ParamEntry &p : plan.params)
    if (!(p.flags &
          (artifact::ParamEntry::Constant | artifact::ParamEntry::State |
           artifact::ParamEntry::LowCopy)))
      params[p.name] = &p;
  if (options.format == "safetensors")
    return writeSafetensors(options, art, model,
                            strata::onnx::modelDirectory(source), params,
                            shards.get());

  bool external = options.externalData;
  uint64_t total = 0;
  for (const auto &t : model.graph().initializer()) {
    external |= t.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL;
    total += t.raw_data().size();
  }
  for (const auto &[name, p] : params)
    total += p->bytes;
  external |= total > (uint64_t(1) << 30);

  std::string dataName = baseOf(options.output) + ".data";
  std::string data;
  std::string baseDir = strata::onnx::modelDirectory(source);
  size_t replaced = 0;
  // --fp32-masters: (fp32 initializer name, model name, model type) of each
  // master kept in fp32, for the Casts put in front of the graph.
  std::vector<std::tuple<std::string, std::string, int>> masters;
  std::set<std::string> taken;
  for (const auto &t : model.graph().initializer())
    taken.insert(t.name());
  for (const auto &n : model.graph().node())
    for (const std::string &o : n.output())
      taken.insert(o);
  for (auto &t : *model.mutable_graph()->mutable_initializer()) {
    std::string bytes;
    auto it = params.find(t.name());
    if (it != params.end()) {
      int type = t.data_type();
      if (!trainedValue(art, *it->second, t, options.fp32Masters, shards.get(),
                        bytes, type, error))
        return fail(error);
      if (type != t.data_type()) {
        // An fp32 master kept as it is (--fp32-masters).
        std::string name = t.name() + ".fp32";
        while (taken.count(name))
          name += "_";
        taken.insert(name);
        masters.emplace_back(name, t.name(), t.data_type());
        t.set_name(name);
        t.set_data_type(type);
      }
      ++replaced;
    } else if (t.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL) {
      // The importer's reader: the same checks of the location and size.
      strata::onnx::TensorData stored;
      if (!strata::onnx::readTensor(t, baseDir, stored, error))
        return fail(error);
      bytes.assign(static_cast<const char *>(stored.data), stored.size);
    } else if (t.has_raw_data()) {
      bytes = t.raw_data();
    } else {
      continue; // Typed-field data stays inline.
    }
    clearData(t);
    if (!external) {
      t.set_raw_data(bytes);
      continue;
    }
    size_t offset = (data.size() + 4095) / 4096 * 4096;
    data.resize(offset, '\0');
    data += bytes;
    t.set_data_location(::onnx::TensorProto_DataLocation_EXTERNAL);
    auto add = [&](const char *key, const std::string &value) {
      auto *e = t.add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    add("location", dataName);
    add("offset", std::to_string(offset));
    add("length", std::to_string(bytes.size()));
  }
  // Each fp32 master read as the model's type, before any other node. A
  // graph input of the model's name (an export that lists initializers as
  // inputs) would define it twice: it goes.
  std::set<std::string> castNames;
  for (const auto &m : masters)
    castNames.insert(std::get<1>(m));
  auto *inputs = model.mutable_graph()->mutable_input();
  for (int i = inputs->size() - 1; i >= 0; --i)
    if (castNames.count(inputs->Get(i).name()))
      inputs->DeleteSubrange(i, 1);
  if (!masters.empty()) {
    google::protobuf::RepeatedPtrField<::onnx::NodeProto> nodes;
    for (const auto &[from, to, type] : masters) {
      ::onnx::NodeProto *cast = nodes.Add();
      cast->set_op_type("Cast");
      cast->set_name(to + "/master_cast");
      cast->add_input(from);
      cast->add_output(to);
      auto *attr = cast->add_attribute();
      attr->set_name("to");
      attr->set_type(::onnx::AttributeProto_AttributeType_INT);
      attr->set_i(type);
    }
    for (::onnx::NodeProto &n : *model.mutable_graph()->mutable_node())
      nodes.Add(std::move(n));
    model.mutable_graph()->mutable_node()->Swap(&nodes);
  }
  // A trained parameter left out would be lost from the exported model.
  if (replaced != params.size())
    return fail(std::to_string(params.size() - replaced) + " of " +
                std::to_string(params.size()) +
                " trained parameters have no initializer of the same name "
                "in " +
                source);
  if (external &&
      !writeFileAtomically(strata::onnx::modelDirectory(options.output) + "/" +
                               dataName,
                           data.data(), data.size(), error))
    return fail(error);
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return fail("cannot serialize the model (over 2 GiB? use "
                "--external-data)");
  if (!writeFileAtomically(options.output, bytes.data(), bytes.size(), error))
    return fail(error);
  std::fprintf(stderr, "strata-export: wrote %s (%zu parameters%s)\n",
               options.output.c_str(), replaced,
               external ? (", tensors in " + dataName).c_str() : "");
  return 0;
}
