//===- OnnxProto.h - The ONNX reader at the protobuf level ------*- C++ -*-===//
//
// For tools that rewrite a model rather than import it (strata-export): the
// reader's own loading and tensor decoding, with its checks (regular files,
// the 2 GiB protobuf limit, external data inside the model's directory and
// within its file), on ONNX's protobuf types. Needs RTTI and exceptions
// like OnnxReader.cpp: include it only from code built that way.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_COMPILER_IMPORT_ONNXPROTO_H
#define STRATA_COMPILER_IMPORT_ONNXPROTO_H

#include "compiler/import/OnnxModel.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace strata::onnx {

/// Reads `path` into `proto`: `.onnxtext`/`.txt` as ONNX's text syntax,
/// anything else as a binary protobuf. False with `error` naming the file.
bool loadModelProto(const std::string &path, ::onnx::ModelProto &proto,
                    std::string &error);

/// The bytes of `tensor`, densely packed: its raw data (pointing into
/// `tensor`, which must outlive `out`), its typed fields (a packed copy) or
/// its external data (mapped from `baseDir`, the model's directory).
bool readTensor(const ::onnx::TensorProto &tensor, const std::string &baseDir,
                TensorData &out, std::string &error);

/// A fingerprint of a model's structure: its nodes (with their attributes),
/// graph inputs and outputs by name, and its initializers' names, types and
/// shapes, but not their values, so a model whose weights were changed
/// (fine-tuned, exported back) still matches the one it came from. Never 0.
uint64_t graphFingerprint(const ::onnx::ModelProto &proto);

/// The directory of a model file: where its external data lives.
std::string modelDirectory(const std::string &path);

} // namespace strata::onnx

#endif // STRATA_COMPILER_IMPORT_ONNXPROTO_H
