//===- OnnxModel.h - An ONNX model as plain C++ data ------------*- C++ -*-===//
//
// The ONNX reader turns a ModelProto (binary or text) into these plain
// structures, so that protobuf (built with RTTI and exceptions) stays out of
// the MLIR side of the importer, and so that tensor data is never copied into
// a protobuf message: external data is memory-mapped and referred to.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_COMPILER_IMPORT_ONNXMODEL_H
#define STRATA_COMPILER_IMPORT_ONNXMODEL_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace strata::onnx {

/// ONNX TensorProto.DataType codes used by Strata.
enum DataType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
};

/// Bytes per element, 0 for types without a fixed size.
size_t dataTypeSize(int32_t dataType);
/// ONNX's name for a data type ("FLOAT", "INT64", ...).
std::string dataTypeName(int32_t dataType);

/// A read-only memory mapping of a whole file (RAII).
class MappedFile {
public:
  static std::shared_ptr<MappedFile> open(const std::string &path,
                                          std::string &error);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const char *data() const { return data_; }
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

private:
  MappedFile() = default;
  const char *data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

/// The bytes of a tensor, little-endian and densely packed in row-major order.
/// `data` points into whatever `keepAlive` holds: a converted copy, the parsed
/// model's raw_data, or a mapped external data file, so large tensors are
/// never copied.
struct TensorData {
  std::string name;
  int32_t dataType = kUndefined;
  std::vector<int64_t> dims;
  std::shared_ptr<const void> keepAlive;
  const char *data = nullptr;
  size_t size = 0;
  /// The external data file, for messages; empty when the data is inline.
  std::string externalLocation;

  int64_t numElements() const;
};

struct Graph;

struct Attribute {
  enum Kind {
    Float,
    Int,
    String,
    Tensor,
    Floats,
    Ints,
    Strings,
    GraphBody,
    Other
  };
  std::string name;
  Kind kind = Other;
  float f = 0;
  int64_t i = 0;
  std::string s;
  TensorData t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  /// A GRAPH attribute: the body of a Loop, a branch of an If.
  std::shared_ptr<const Graph> g;
};

struct Node {
  std::string opType;
  std::string domain;
  std::string name;
  /// Input names; an empty name is an omitted optional input.
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<Attribute> attributes;

  const Attribute *attribute(const std::string &attrName) const;
};

/// A graph input or output: element type and shape, where each dimension is
/// a number or a symbolic name (`batch`), or unknown.
struct ValueInfo {
  struct Dim {
    int64_t value = -1;
    std::string param;
  };
  std::string name;
  int32_t dataType = kUndefined;
  bool hasShape = false;
  std::vector<Dim> dims;
};

/// A sub-graph (an attribute of Loop, If, Scan): its nodes may also read
/// values of the enclosing graphs by name.
struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<TensorData> initializers;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
};

struct Model {
  std::string path;
  /// graphFingerprint (OnnxProto.h) of the file as read, before functions
  /// were inlined.
  uint64_t fingerprint = 0;
  int64_t irVersion = 0;
  /// Version of the default (ai.onnx) operator set (0 if not imported).
  int64_t opset = 0;
  /// Versions of the other operator sets, by domain.
  std::map<std::string, int64_t> domainOpsets;
  std::string producer;
  std::string graphName;
  std::vector<Node> nodes;
  std::vector<TensorData> initializers;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
};

/// Reads a binary `.onnx` model; external data files are resolved relative
/// to the model's directory and memory-mapped. Returns false with `error` set.
bool readModelFile(const std::string &path, Model &model, std::string &error);

/// Parses a model in ONNX's text syntax; `baseDir` resolves external data.
bool parseModelText(const std::string &text, const std::string &baseDir,
                    Model &model, std::string &error);

/// Reads a model by file extension: `.onnxtext`/`.txt` as text, else binary.
bool loadModel(const std::string &path, Model &model, std::string &error);

} // namespace strata::onnx

#endif // STRATA_COMPILER_IMPORT_ONNXMODEL_H
