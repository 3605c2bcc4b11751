//===- OnnxReader.cpp - ModelProto to plain C++ data ----------------------===//
//
// The one translation unit that touches protobuf and ONNX's C++ library. It
// is compiled with RTTI and exceptions (the ONNX library needs them), and
// includes no LLVM or MLIR header.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/OnnxModel.h"
#include "compiler/import/OnnxProto.h"
#include "runtime/support/Checked.h"
#include "runtime/support/FileUtil.h"

#include <onnx/defs/parser.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace strata::onnx {

size_t dataTypeSize(int32_t dataType) {
  switch (dataType) {
  case kFloat:
  case kInt32:
  case kUInt32:
    return 4;
  case kUInt8:
  case kInt8:
  case kBool:
    return 1;
  case kUInt16:
  case kInt16:
  case kFloat16:
  case kBFloat16:
    return 2;
  case kInt64:
  case kDouble:
  case kUInt64:
    return 8;
  default:
    return 0;
  }
}

std::string dataTypeName(int32_t dataType) {
  if (::onnx::TensorProto_DataType_IsValid(dataType))
    return ::onnx::TensorProto_DataType_Name(
        static_cast<::onnx::TensorProto_DataType>(dataType));
  return "type " + std::to_string(dataType);
}

std::shared_ptr<MappedFile> MappedFile::open(const std::string &path,
                                             std::string &error) {
  uint64_t size = 0;
  strata::UniqueFd owned =
      strata::openRegularFile(path, "external data", size, error);
  if (owned.get() < 0)
    return nullptr;
  int fd = owned.release();
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(size);
  if (file->size_ > 0) {
    void *p = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      error = "cannot map '" + path + "': " + std::strerror(errno);
      ::close(fd);
      return nullptr;
    }
    file->data_ = static_cast<const char *>(p);
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (data_)
    munmap(const_cast<char *>(data_), size_);
}

int64_t TensorData::numElements() const {
  // The reader refuses tensors whose count overflows (convertTensor).
  return strata::checkedNumElements(dims).value_or(-1);
}

const Attribute *Node::attribute(const std::string &attrName) const {
  for (const Attribute &a : attributes)
    if (a.name == attrName)
      return &a;
  return nullptr;
}

namespace {

std::string dimsString(const std::vector<int64_t> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "x" : "") + std::to_string(dims[i]);
  return s + "]";
}

/// Converts protobuf messages, sharing mapped external data files.
class Converter {
public:
  Converter(std::string baseDir, std::shared_ptr<::onnx::ModelProto> proto)
      : baseDir_(std::move(baseDir)), proto_(std::move(proto)) {}

  bool convert(Model &model, std::string &error);
  bool convertTensor(const ::onnx::TensorProto &t, TensorData &out,
                     std::string &error);

private:
  bool convertExternal(const ::onnx::TensorProto &t, TensorData &out,
                       std::string &error);
  bool convertAttribute(const ::onnx::AttributeProto &a, Attribute &out,
                        std::string &error, int depth);
  bool convertNode(const ::onnx::NodeProto &n, Node &out, std::string &error,
                   int depth);
  bool convertGraph(const ::onnx::GraphProto &g, Graph &out, std::string &error,
                    int depth);
  static void convertValueInfo(const ::onnx::ValueInfoProto &v, ValueInfo &out);

  template <typename T, typename Field>
  static void packTyped(const Field &field, TensorData &out) {
    auto bytes = std::make_shared<std::vector<char>>(field.size() * sizeof(T));
    for (int k = 0; k < field.size(); ++k) {
      T v = static_cast<T>(field.Get(k));
      std::memcpy(bytes->data() + k * sizeof(T), &v, sizeof(T));
    }
    out.data = bytes->data();
    out.size = bytes->size();
    out.keepAlive = std::move(bytes);
  }

  std::string baseDir_;
  std::shared_ptr<::onnx::ModelProto> proto_;
  std::map<std::string, std::shared_ptr<MappedFile>> files_;
};

bool Converter::convertExternal(const ::onnx::TensorProto &t, TensorData &out,
                                std::string &error) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &entry : t.external_data()) {
    bool ok = true;
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      ok = strata::parseInt64(entry.value(), offset, 0);
    else if (entry.key() == "length")
      ok = strata::parseInt64(entry.value(), length, 0);
    if (!ok) {
      error = "tensor '" + t.name() + "': invalid external data " +
              entry.key() + " '" + entry.value() + "' (a non-negative integer)";
      return false;
    }
  }
  if (location.empty()) {
    error = "tensor '" + t.name() + "': external data without a location";
    return false;
  }
  if (location.front() == '/' || location.find("..") != std::string::npos) {
    error = "tensor '" + t.name() + "': external data location '" + location +
            "' must be a relative path inside the model's directory";
    return false;
  }
  std::string path = baseDir_.empty() ? location : baseDir_ + "/" + location;
  std::shared_ptr<MappedFile> &file = files_[path];
  if (!file) {
    std::string why;
    file = MappedFile::open(path, why);
    if (!file) {
      error = "tensor '" + t.name() + "': missing external data file: " + why;
      files_.erase(path);
      return false;
    }
  }
  if (length < 0)
    length = static_cast<int64_t>(file->size()) -
             std::min<int64_t>(offset, file->size());
  if (offset < 0 || length < 0 ||
      static_cast<uint64_t>(offset) + static_cast<uint64_t>(length) >
          file->size()) {
    error = "tensor '" + t.name() + "': external data file '" + path + "' is " +
            std::to_string(file->size()) + " bytes, too short for offset " +
            std::to_string(offset) + " + length " + std::to_string(length) +
            " (truncated?)";
    return false;
  }
  out.externalLocation = location;
  out.data = file->data() + offset;
  out.size = static_cast<size_t>(length);
  out.keepAlive = file;
  return true;
}

bool Converter::convertTensor(const ::onnx::TensorProto &t, TensorData &out,
                              std::string &error) {
  out.name = t.name();
  out.dataType = t.data_type();
  out.dims.assign(t.dims().begin(), t.dims().end());
  size_t elementSize = dataTypeSize(out.dataType);
  if (elementSize == 0) {
    error = "tensor '" + t.name() + "' has unsupported element type " +
            dataTypeName(out.dataType);
    return false;
  }
  if (t.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL) {
    if (!convertExternal(t, out, error))
      return false;
  } else if (t.has_raw_data()) {
    // Point into the parsed message, which `keepAlive` holds.
    out.data = t.raw_data().data();
    out.size = t.raw_data().size();
    out.keepAlive = proto_;
  } else {
    switch (out.dataType) {
    case kFloat:
      packTyped<float>(t.float_data(), out);
      break;
    case kDouble:
      packTyped<double>(t.double_data(), out);
      break;
    case kInt64:
      packTyped<int64_t>(t.int64_data(), out);
      break;
    case kInt32:
      packTyped<int32_t>(t.int32_data(), out);
      break;
    case kInt16:
      packTyped<int16_t>(t.int32_data(), out);
      break;
    case kInt8:
      packTyped<int8_t>(t.int32_data(), out);
      break;
    case kUInt8:
    case kBool:
      packTyped<uint8_t>(t.int32_data(), out);
      break;
    case kUInt16:
    case kFloat16:
    case kBFloat16: // Stored as their 16-bit patterns in int32_data.
      packTyped<uint16_t>(t.int32_data(), out);
      break;
    case kUInt32:
      packTyped<uint32_t>(t.uint64_data(), out);
      break;
    case kUInt64:
      packTyped<uint64_t>(t.uint64_data(), out);
      break;
    }
  }
  for (int64_t d : out.dims) {
    if (d < 0) {
      error = "tensor '" + t.name() + "' has a negative dimension";
      return false;
    }
  }
  std::optional<uint64_t> bytes =
      strata::checkedByteSize(out.dims, elementSize);
  if (!bytes) {
    error = "tensor '" + t.name() + "' has dimensions " + dimsString(out.dims) +
            " whose size overflows 64 bits";
    return false;
  }
  size_t expected = *bytes;
  if (out.size != expected) {
    error = "tensor '" + t.name() + "' has " + std::to_string(out.size) +
            " bytes of data, expected " + std::to_string(expected) + " for " +
            dataTypeName(out.dataType) + " " + dimsString(out.dims);
    return false;
  }
  return true;
}

bool Converter::convertAttribute(const ::onnx::AttributeProto &a,
                                 Attribute &out, std::string &error,
                                 int depth) {
  out.name = a.name();
  switch (a.type()) {
  case ::onnx::AttributeProto_AttributeType_FLOAT:
    out.kind = Attribute::Float;
    out.f = a.f();
    break;
  case ::onnx::AttributeProto_AttributeType_INT:
    out.kind = Attribute::Int;
    out.i = a.i();
    break;
  case ::onnx::AttributeProto_AttributeType_STRING:
    out.kind = Attribute::String;
    out.s = a.s();
    break;
  case ::onnx::AttributeProto_AttributeType_TENSOR:
    out.kind = Attribute::Tensor;
    return convertTensor(a.t(), out.t, error);
  case ::onnx::AttributeProto_AttributeType_FLOATS:
    out.kind = Attribute::Floats;
    out.floats.assign(a.floats().begin(), a.floats().end());
    break;
  case ::onnx::AttributeProto_AttributeType_INTS:
    out.kind = Attribute::Ints;
    out.ints.assign(a.ints().begin(), a.ints().end());
    break;
  case ::onnx::AttributeProto_AttributeType_STRINGS:
    out.kind = Attribute::Strings;
    out.strings.assign(a.strings().begin(), a.strings().end());
    break;
  case ::onnx::AttributeProto_AttributeType_GRAPH: {
    out.kind = Attribute::GraphBody;
    auto graph = std::make_shared<Graph>();
    if (!convertGraph(a.g(), *graph, error, depth + 1))
      return false;
    out.g = std::move(graph);
    break;
  }
  default:
    out.kind = Attribute::Other;
    break;
  }
  return true;
}

bool Converter::convertNode(const ::onnx::NodeProto &n, Node &node,
                            std::string &error, int depth) {
  node.opType = n.op_type();
  node.domain = n.domain();
  node.name = n.name();
  node.inputs.assign(n.input().begin(), n.input().end());
  node.outputs.assign(n.output().begin(), n.output().end());
  for (const auto &a : n.attribute()) {
    Attribute attr;
    if (!convertAttribute(a, attr, error, depth)) {
      error = "node '" + n.name() + "' (" + n.op_type() + "), attribute '" +
              a.name() + "': " + error;
      return false;
    }
    node.attributes.push_back(std::move(attr));
  }
  return true;
}

/// A Loop body or If branch; sub-graphs nest at most 16 deep (a hostile
/// model could otherwise recurse until the stack runs out).
bool Converter::convertGraph(const ::onnx::GraphProto &g, Graph &out,
                             std::string &error, int depth) {
  if (depth > 16) {
    error = "sub-graphs nest more than 16 deep";
    return false;
  }
  out.name = g.name();
  for (const auto &t : g.initializer()) {
    TensorData data;
    if (!convertTensor(t, data, error))
      return false;
    out.initializers.push_back(std::move(data));
  }
  for (const auto &v : g.input()) {
    ValueInfo info;
    convertValueInfo(v, info);
    out.inputs.push_back(std::move(info));
  }
  for (const auto &v : g.output()) {
    ValueInfo info;
    convertValueInfo(v, info);
    out.outputs.push_back(std::move(info));
  }
  for (const auto &n : g.node()) {
    Node node;
    if (!convertNode(n, node, error, depth))
      return false;
    out.nodes.push_back(std::move(node));
  }
  return true;
}

void Converter::convertValueInfo(const ::onnx::ValueInfoProto &v,
                                 ValueInfo &out) {
  out.name = v.name();
  if (!v.type().has_tensor_type())
    return;
  const auto &tensorType = v.type().tensor_type();
  out.dataType = tensorType.elem_type();
  if (!tensorType.has_shape())
    return;
  out.hasShape = true;
  for (const auto &d : tensorType.shape().dim()) {
    ValueInfo::Dim dim;
    if (d.has_dim_value())
      dim.value = d.dim_value();
    else if (d.has_dim_param())
      dim.param = d.dim_param();
    out.dims.push_back(dim);
  }
}

/// Checks a node of a standard domain against ONNX's own operator schema
/// for the model's opset: input and output counts, and the type of every
/// attribute it sets (a FLOAT where an INT is expected would otherwise be
/// replaced by the default without a word).
static bool checkAgainstSchema(const ::onnx::NodeProto &n, const Model &model,
                               std::string &error) {
  bool standard = n.domain().empty() || n.domain() == "ai.onnx";
  if (!standard || model.opset <= 0)
    return true; // Custom domains have no schema; the importer decides.
  // ONNX's library knows the opsets up to its release; a later opset may
  // have changed the op, so its nodes are left to the importer's checks.
  const auto &ranges =
      ::onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto range = ranges.find(::onnx::ONNX_DOMAIN);
  if (range == ranges.end() || model.opset > range->second.second)
    return true;
  const ::onnx::OpSchema *schema = ::onnx::OpSchemaRegistry::Schema(
      n.op_type(), static_cast<int>(model.opset), "");
  if (!schema)
    return true; // Unknown ops are reported, all at once, by the importer.
  if (n.input_size() > schema->max_input() ||
      n.input_size() < schema->min_input()) {
    error = "has " + std::to_string(n.input_size()) + " inputs; " +
            n.op_type() + " (opset " + std::to_string(model.opset) +
            ") takes " + std::to_string(schema->min_input()) +
            (schema->max_input() == schema->min_input() ? ""
             : schema->max_input() > 1000
                 ? " or more"
                 : " to " + std::to_string(schema->max_input()));
    return false;
  }
  if (n.output_size() > schema->max_output() ||
      n.output_size() < schema->min_output()) {
    error = "has " + std::to_string(n.output_size()) + " outputs; " +
            n.op_type() + " has " + std::to_string(schema->min_output()) +
            (schema->max_output() == schema->min_output()
                 ? ""
                 : " to " + std::to_string(schema->max_output()));
    return false;
  }
  const auto &attributes = schema->attributes();
  for (const auto &a : n.attribute()) {
    auto it = attributes.find(a.name());
    if (it == attributes.end()) {
      error = "has attribute '" + a.name() + "', which " + n.op_type() +
              " does not define";
      return false;
    }
    if (a.type() != it->second.type) {
      error = "attribute '" + a.name() + "' is " +
              ::onnx::AttributeProto_AttributeType_Name(a.type()) + ", " +
              n.op_type() + " expects " +
              ::onnx::AttributeProto_AttributeType_Name(it->second.type);
      return false;
    }
  }
  return true;
}

/// The model's nodes with every call of a model-local function
/// (ModelProto.functions, which newer exporters write, one per module)
/// replaced by the function's body: formal inputs and outputs renamed to the
/// call's, the body's own names prefixed to stay unique, attribute
/// references resolved from the call (the ONNX library here predates
/// attribute defaults on functions: one not given is the op's default); calls
/// inside bodies too, 32 deep at most (a function calling itself would
/// never end).
static bool inlineFunctions(const ::onnx::ModelProto &proto, int64_t opset,
                            std::vector<::onnx::NodeProto> &out,
                            std::string &error) {
  constexpr size_t kMaxInlinedNodes = size_t(1) << 20;
  std::map<std::pair<std::string, std::string>, const ::onnx::FunctionProto *>
      functions;
  for (const auto &f : proto.functions())
    functions[{f.domain(), f.name()}] = &f;
  int calls = 0;
  std::function<bool(const ::onnx::NodeProto &, int)> expand =
      [&](const ::onnx::NodeProto &n, int depth) {
        auto it = functions.find({n.domain(), n.op_type()});
        if (it == functions.end()) {
          // Calls that fan out at every level grow exponentially.
          if (out.size() >= kMaxInlinedNodes) {
            error = "inlining the model-local functions gives more than " +
                    std::to_string(kMaxInlinedNodes) + " nodes";
            return false;
          }
          out.push_back(n);
          return true;
        }
        const ::onnx::FunctionProto &f = *it->second;
        std::string what = "function '" + f.domain() + "." + f.name() + "'";
        if (depth >= 32) {
          error = what + " nests calls more than 32 deep (does it call "
                         "itself?)";
          return false;
        }
        for (const auto &o : f.opset_import())
          if ((o.domain().empty() || o.domain() == "ai.onnx") &&
              o.version() != opset) {
            error = what + " imports opset " + std::to_string(o.version()) +
                    " and the model " + std::to_string(opset) +
                    "; a function's ops are read at the model's opset";
            return false;
          }
        std::string prefix = (n.name().empty() ? f.name() : n.name()) + "/" +
                             std::to_string(calls++) + "/";
        std::map<std::string, std::string> rename;
        for (int i = 0; i < f.input_size(); ++i)
          rename[f.input(i)] = i < n.input_size() ? n.input(i) : "";
        for (int i = 0; i < f.output_size(); ++i)
          rename[f.output(i)] = i < n.output_size() && !n.output(i).empty()
                                    ? n.output(i)
                                    : prefix + f.output(i);
        auto nameOf = [&](const std::string &s) {
          if (s.empty())
            return s;
          auto r = rename.find(s);
          return r != rename.end() ? r->second : prefix + s;
        };
        std::map<std::string, const ::onnx::AttributeProto *> attributes;
        for (const auto &a : n.attribute())
          attributes[a.name()] = &a;
        for (const ::onnx::NodeProto &body : f.node()) {
          ::onnx::NodeProto call = body;
          call.clear_input();
          call.clear_output();
          call.clear_attribute();
          call.set_name(prefix + body.name());
          for (const auto &i : body.input())
            call.add_input(nameOf(i));
          for (const auto &o : body.output())
            call.add_output(nameOf(o));
          for (const auto &a : body.attribute()) {
            if (a.ref_attr_name().empty()) {
              *call.add_attribute() = a;
              continue;
            }
            auto r = attributes.find(a.ref_attr_name());
            if (r == attributes.end())
              continue; // Not given: the op's own default.
            ::onnx::AttributeProto resolved = *r->second;
            resolved.set_name(a.name());
            *call.add_attribute() = resolved;
          }
          if (!expand(call, depth + 1))
            return false;
        }
        return true;
      };
  for (const auto &n : proto.graph().node())
    if (!expand(n, 0))
      return false;
  return true;
}

bool Converter::convert(Model &model, std::string &error) {
  const ::onnx::ModelProto &proto = *proto_;
  if (!proto.has_graph()) {
    error = "the model has no graph";
    return false;
  }
  model.irVersion = proto.ir_version();
  model.producer = proto.producer_name();
  if (!proto.producer_version().empty())
    model.producer += " " + proto.producer_version();
  for (const auto &opset : proto.opset_import()) {
    if (opset.domain().empty() || opset.domain() == "ai.onnx")
      model.opset = opset.version();
    else
      model.domainOpsets[opset.domain()] = opset.version();
  }
  const ::onnx::GraphProto &graph = proto.graph();
  model.graphName = graph.name();
  for (const auto &t : graph.initializer()) {
    TensorData data;
    if (!convertTensor(t, data, error))
      return false;
    model.initializers.push_back(std::move(data));
  }
  if (graph.sparse_initializer_size() > 0) {
    error = "sparse initializers are not supported (" +
            graph.sparse_initializer(0).values().name() + ")";
    return false;
  }
  for (const auto &v : graph.input()) {
    ValueInfo info;
    convertValueInfo(v, info);
    model.inputs.push_back(std::move(info));
  }
  for (const auto &v : graph.output()) {
    ValueInfo info;
    convertValueInfo(v, info);
    model.outputs.push_back(std::move(info));
  }
  // Names are SSA values: one definition each. A duplicate initializer, or
  // a node output redefining an input, initializer or earlier output, would
  // otherwise silently pick one of the two.
  std::map<std::string, std::string> defined; // name -> what defines it
  auto define = [&](const std::string &name, const std::string &what) {
    if (name.empty())
      return true; // An omitted optional output.
    auto [it, inserted] = defined.emplace(name, what);
    if (inserted)
      return true;
    error =
        "'" + name + "' is defined twice: by " + it->second + " and by " + what;
    return false;
  };
  if (proto.functions_size() > 0) {
    // The graph's nodes become the inlined ones, in the message itself:
    // tensors of attributes point into it (raw data is not copied).
    std::vector<::onnx::NodeProto> nodes;
    if (!inlineFunctions(proto, model.opset, nodes, error))
      return false;
    auto *graphNodes = proto_->mutable_graph()->mutable_node();
    graphNodes->Clear();
    for (::onnx::NodeProto &n : nodes)
      *graphNodes->Add() = std::move(n);
  }
  for (const auto &t : graph.initializer())
    if (!define(t.name(), "an initializer"))
      return false;
  std::set<std::string> inputNames;
  for (const auto &v : graph.input()) {
    // An input may name an initializer (its default value, IR < 4 style),
    // but not another input.
    if (!inputNames.insert(v.name()).second) {
      error = "graph input '" + v.name() + "' is declared twice";
      return false;
    }
    if (!defined.count(v.name()) && !define(v.name(), "a graph input"))
      return false;
  }
  std::set<std::string> outputNames;
  for (const auto &v : graph.output())
    if (!outputNames.insert(v.name()).second) {
      error = "graph output '" + v.name() + "' is declared twice";
      return false;
    }
  for (const auto &n : graph.node()) {
    std::string what = "node '" + n.name() + "' (" + n.op_type() + ")";
    for (const auto &o : n.output())
      if (!define(o, what))
        return false;
    if (!checkAgainstSchema(n, model, error)) {
      error = what + ": " + error;
      return false;
    }
  }
  for (const auto &n : graph.node()) {
    Node node;
    if (!convertNode(n, node, error, 0))
      return false;
    model.nodes.push_back(std::move(node));
  }
  return true;
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool endsWith(const std::string &path, const std::string &suffix) {
  return path.size() >= suffix.size() &&
         path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool parseText(const std::string &text, ::onnx::ModelProto &proto,
               std::string &error) {
  try {
    ::onnx::Common::Status status =
        ::onnx::OnnxParser::Parse(proto, text.c_str());
    if (!status.IsOK()) {
      error = "ONNX text syntax error: " + status.ErrorMessage();
      return false;
    }
  } catch (const std::exception &e) {
    error = std::string("ONNX text syntax error: ") + e.what();
    return false;
  }
  return true;
}

bool readBinary(const std::string &path, ::onnx::ModelProto &proto,
                std::string &error) {
  uint64_t size = 0;
  strata::UniqueFd fd = strata::openRegularFile(path, "model", size, error);
  if (fd.get() < 0)
    return false;
  if (size >= INT_MAX) {
    error = "'" + path + "' is " + std::to_string(size) +
            " bytes; a protobuf cannot exceed 2 GiB. Save the model with its "
            "tensors as external data (onnx.save_model(..., "
            "save_as_external_data=True))";
    return false;
  }
  google::protobuf::io::FileInputStream stream(fd.get());
  google::protobuf::io::CodedInputStream coded(&stream);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!proto.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    error = "'" + path + "' is not a valid ONNX model (protobuf parse failed)";
    return false;
  }
  return true;
}

bool readText(const std::string &path, ::onnx::ModelProto &proto,
              std::string &error) {
  uint64_t size = 0;
  strata::UniqueFd fd = strata::openRegularFile(path, "model", size, error);
  if (fd.get() < 0)
    return false;
  if (size > (uint64_t(1) << 30)) {
    error = "'" + path + "' is too large for an ONNX text model";
    return false;
  }
  std::string text(size, '\0');
  if (!strata::preadAll(fd.get(), text.data(), size, 0)) {
    error = "cannot read '" + path + "': " + std::strerror(errno);
    return false;
  }
  if (!parseText(text, proto, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

} // namespace

uint64_t graphFingerprint(const ::onnx::ModelProto &proto) {
  // FNV-1a over length-prefixed fields, so no two field lists collide by
  // concatenation.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::string &bytes) {
    uint64_t n = bytes.size();
    for (int i = 0; i < 8; ++i)
      h = (h ^ ((n >> (8 * i)) & 0xff)) * 1099511628211ull;
    for (unsigned char c : bytes)
      h = (h ^ c) * 1099511628211ull;
  };
  const ::onnx::GraphProto &g = proto.graph();
  for (const auto &f : proto.functions())
    mix(f.SerializeAsString());
  for (const auto &n : g.node())
    mix(n.SerializeAsString());
  for (const auto &v : g.input())
    mix("in:" + v.name());
  for (const auto &v : g.output())
    mix("out:" + v.name());
  for (const auto &t : g.initializer()) {
    std::string dims;
    for (int64_t d : t.dims())
      dims += std::to_string(d) + "x";
    mix("init:" + t.name() + ":" + std::to_string(t.data_type()) + ":" + dims);
  }
  return h ? h : 1;
}

std::string modelDirectory(const std::string &path) {
  return directoryOf(path);
}

bool loadModelProto(const std::string &path, ::onnx::ModelProto &proto,
                    std::string &error) {
  return endsWith(path, ".onnxtext") || endsWith(path, ".txt")
             ? readText(path, proto, error)
             : readBinary(path, proto, error);
}

bool readTensor(const ::onnx::TensorProto &tensor, const std::string &baseDir,
                TensorData &out, std::string &error) {
  // Raw data stays in `tensor` (the caller's): nothing to keep alive.
  Converter converter(baseDir, nullptr);
  return converter.convertTensor(tensor, out, error);
}

/// `proto`, read from `path`, as a Model; errors name the file.
static bool convertFile(const std::string &path,
                        std::shared_ptr<::onnx::ModelProto> proto, Model &model,
                        std::string &error) {
  model = Model();
  model.path = path;
  model.fingerprint = graphFingerprint(*proto);
  Converter converter(directoryOf(path), std::move(proto));
  if (!converter.convert(model, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

bool readModelFile(const std::string &path, Model &model, std::string &error) {
  auto proto = std::make_shared<::onnx::ModelProto>();
  return readBinary(path, *proto, error) &&
         convertFile(path, std::move(proto), model, error);
}

bool parseModelText(const std::string &text, const std::string &baseDir,
                    Model &model, std::string &error) {
  auto proto = std::make_shared<::onnx::ModelProto>();
  if (!parseText(text, *proto, error))
    return false;
  model = Model();
  Converter converter(baseDir, proto);
  return converter.convert(model, error);
}

bool loadModel(const std::string &path, Model &model, std::string &error) {
  auto proto = std::make_shared<::onnx::ModelProto>();
  return loadModelProto(path, *proto, error) &&
         convertFile(path, std::move(proto), model, error);
}

} // namespace strata::onnx
