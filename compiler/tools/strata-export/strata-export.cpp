//===- strata-export.cpp - Trained weights back into the ONNX model -------===//
//
//   strata-export model.strata -o finetuned.onnx [--checkpoint FILE]
//
// Writes the model the artifact was compiled from with every parameter's
// initializer replaced by its trained value (same names, same types). Large
// models, and models that came with external data, get their tensors in an
// external data file next to the output (4 KiB-aligned), so the output is
// loadable by any ONNX runtime and never a >2 GiB protobuf.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/OnnxProto.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/cpu/Half.h"
#include "runtime/support/Checked.h"
#include "runtime/support/FileUtil.h"
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
  bool externalData = false;
  /// Half-precision initializers trained as fp32 masters stay fp32, read
  /// through a Cast to the model's type.
  bool fp32Masters = false;
};

void usage(FILE *out) {
  std::fprintf(out,
               "usage: strata-export ARTIFACT -o OUT.onnx [options]\n\n"
               "Writes the source ONNX model with its initializers replaced "
               "by the trained values.\n\n"
               "options:\n"
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

int fail(const std::string &message) {
  std::fprintf(stderr, "strata-export: error: %s\n", message.c_str());
  return 1;
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
  if (::stat(ckpt.c_str(), &st) == 0) {
    trainer::CheckpointInfo info;
    if (!trainer::loadCheckpoint(ckpt, art, info, error))
      return fail(error);
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
      const artifact::ParamEntry &p = *it->second;
      const artifact::Slot &slot = plan.slots[p.slot];
      int64_t n = checkedNumElements(
                      std::vector<int64_t>(t.dims().begin(), t.dims().end()))
                      .value_or(-1);
      if (n != slot.numElements())
        return fail("initializer '" + t.name() + "' has " + std::to_string(n) +
                    " elements in the source model, " +
                    std::to_string(slot.numElements()) + " in the artifact");
      bytes.resize(p.bytes);
      if (!art.readSlot(slot, bytes.data(), error))
        return fail(error);
      // A diverged run must not pass for a trained model.
      if (slot.dtype == DType::F32)
        for (size_t k = 0; k + 4 <= bytes.size(); k += 4) {
          float v;
          std::memcpy(&v, bytes.data() + k, 4);
          if (!std::isfinite(v))
            return fail("parameter '" + t.name() +
                        "' holds a non-finite "
                        "value (element " +
                        std::to_string(k / 4) + " is " + std::to_string(v) +
                        "); the run diverged, export an earlier checkpoint");
        }
      // An fp16 or bf16 initializer trained as an fp32 master (see
      // --strata-autocast) goes back in the model's own type, rounded to
      // nearest; any other difference would be a corrupt model.
      int want = t.data_type();
      bool half = want == ::onnx::TensorProto_DataType_FLOAT16,
           brain = want == ::onnx::TensorProto_DataType_BFLOAT16;
      if (slot.dtype == DType::F32 && (half || brain) && options.fp32Masters) {
        std::string name = t.name() + ".fp32";
        while (taken.count(name))
          name += "_";
        taken.insert(name);
        masters.emplace_back(name, t.name(), want);
        t.set_name(name);
        t.set_data_type(::onnx::TensorProto_DataType_FLOAT);
      } else if (slot.dtype == DType::F32 && (half || brain)) {
        size_t n = bytes.size() / 4;
        std::vector<float> wide(n);
        std::vector<uint16_t> narrow(n);
        std::memcpy(wide.data(), bytes.data(), n * 4);
        cpu::narrowFloats(wide.data(), narrow.data(), static_cast<int64_t>(n),
                          brain);
        bytes.assign(reinterpret_cast<const char *>(narrow.data()), n * 2);
      } else if (DType d = slot.dtype;
                 (want == ::onnx::TensorProto_DataType_FLOAT &&
                  d != DType::F32) ||
                 (want == ::onnx::TensorProto_DataType_DOUBLE &&
                  d != DType::F64) ||
                 (half && d != DType::F16) || (brain && d != DType::BF16)) {
        return fail("initializer '" + t.name() + "' is " +
                    ::onnx::TensorProto_DataType_Name(want) +
                    " in the source model; the artifact holds " +
                    std::string(dtypeName(slot.dtype)) +
                    " values that do not convert to it");
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
