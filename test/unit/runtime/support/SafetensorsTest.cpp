// SafetensorsTest.cpp - The safetensors writer against the format's rules
// (read back by hand here; test/python/test_hf.py reads its files with the
// safetensors library and transformers).

#include "runtime/support/Safetensors.h"

#include "runtime/support/FileUtil.h"
#include "runtime/support/Json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace strata;
using namespace strata::safetensors;

namespace {

std::string tempDir(const std::string &name) {
  return ::testing::TempDir() + "/st-" + name + "." + std::to_string(getpid());
}

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d))
      if (e->d_name[0] != '.')
        names.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// A float tensor of `n` values base, base + 1, ...
Tensor floats(const std::string &name, std::vector<int64_t> shape, float base) {
  Tensor t;
  t.name = name;
  t.shape = shape;
  t.read = [shape, base](std::string &bytes, std::string &) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    for (int64_t i = 0; i < n; ++i) {
      float v = base + static_cast<float>(i);
      bytes.append(reinterpret_cast<const char *>(&v), 4);
    }
    return true;
  };
  return t;
}

/// The header and data of a file, checked for the format's framing.
void split(const std::string &file, json::Value &header, std::string &data) {
  ASSERT_GE(file.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(file[i]);
  ASSERT_LE(8 + n, file.size());
  EXPECT_EQ(n % 8, 0u) << "the data starts 8-byte aligned";
  std::string error;
  ASSERT_TRUE(json::parse(file.substr(8, n), header, error)) << error;
  data = file.substr(8 + n);
}

TEST(Safetensors, OneFileHoldsEveryTensorBackToBack) {
  std::string dir = tempDir("one");
  std::vector<Tensor> tensors = {floats("a.weight", {2, 3}, 1),
                                 floats("b \"quoted\"", {4}, 10)};
  Tensor ids;
  ids.name = "ids";
  ids.dtype = DType::I64;
  ids.shape = {};
  ids.read = [](std::string &bytes, std::string &) {
    int64_t v = -7;
    bytes.assign(reinterpret_cast<const char *>(&v), 8);
    return true;
  };
  tensors.push_back(ids);
  WriteResult result;
  std::string error;
  ASSERT_TRUE(writeModel(dir, tensors, 1 << 20, result, error)) << error;
  EXPECT_EQ(result.totalBytes, 24u + 16u + 8u);
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"model.safetensors"});
  json::Value header;
  std::string data;
  split(readAll(dir + "/model.safetensors"), header, data);
  ASSERT_EQ(data.size(), 48u);
  const json::Value *meta = header.get("__metadata__");
  ASSERT_TRUE(meta);
  EXPECT_EQ(meta->stringOr("format"), "pt");
  const json::Value *a = header.get("a.weight");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->stringOr("dtype"), "F32");
  ASSERT_EQ(a->get("shape")->items.size(), 2u);
  EXPECT_EQ(a->get("shape")->items[1].number, 3);
  EXPECT_EQ(a->get("data_offsets")->items[0].number, 0);
  EXPECT_EQ(a->get("data_offsets")->items[1].number, 24);
  const json::Value *b = header.get("b \"quoted\"");
  ASSERT_TRUE(b) << "names are JSON-escaped";
  EXPECT_EQ(b->get("data_offsets")->items[0].number, 24);
  float b0;
  std::memcpy(&b0, data.data() + 24, 4);
  EXPECT_EQ(b0, 10.0f);
  const json::Value *i = header.get("ids");
  EXPECT_EQ(i->stringOr("dtype"), "I64");
  EXPECT_TRUE(i->get("shape")->items.empty());
  int64_t v;
  std::memcpy(&v, data.data() + 40, 8);
  EXPECT_EQ(v, -7);
}

TEST(Safetensors, ShardsAndAnIndexOverTheShardSize) {
  std::string dir = tempDir("shards");
  // 40, 40 and 80 bytes with shards of 80: [a b] [c]; a tensor over the
  // size gets a shard of its own.
  std::vector<Tensor> tensors = {floats("a", {10}, 0), floats("b", {10}, 0),
                                 floats("c", {20}, 0), floats("d", {30}, 0)};
  WriteResult result;
  std::string error;
  ASSERT_TRUE(writeModel(dir, tensors, 80, result, error)) << error;
  EXPECT_EQ(listDir(dir),
            (std::vector<std::string>{"model-00001-of-00003.safetensors",
                                      "model-00002-of-00003.safetensors",
                                      "model-00003-of-00003.safetensors",
                                      "model.safetensors.index.json"}));
  EXPECT_EQ(result.files.back(), dir + "/model.safetensors.index.json");
  json::Value index;
  ASSERT_TRUE(
      json::parse(readAll(dir + "/model.safetensors.index.json"), index, error))
      << error;
  EXPECT_EQ(index.get("metadata")->numberOr("total_size", 0), 280);
  const json::Value *map = index.get("weight_map");
  EXPECT_EQ(map->stringOr("a"), "model-00001-of-00003.safetensors");
  EXPECT_EQ(map->stringOr("b"), "model-00001-of-00003.safetensors");
  EXPECT_EQ(map->stringOr("c"), "model-00002-of-00003.safetensors");
  EXPECT_EQ(map->stringOr("d"), "model-00003-of-00003.safetensors");
  json::Value header;
  std::string data;
  split(readAll(dir + "/model-00003-of-00003.safetensors"), header, data);
  EXPECT_EQ(data.size(), 120u);
  EXPECT_EQ(header.get("d")->get("data_offsets")->items[0].number, 0);
}

TEST(Safetensors, RefusesWhatWouldMisleadALoaderAndKeepsEarlierFiles) {
  std::string dir = tempDir("stale");
  std::string error;
  WriteResult result;
  ASSERT_TRUE(writeModel(dir, {floats("a", {10}, 0), floats("b", {10}, 0)},
                         1000, result, error))
      << error;
  std::string before = readAll(dir + "/model.safetensors");
  // Sharded now: the single file would shadow the index.
  EXPECT_FALSE(writeModel(dir, {floats("a", {10}, 1), floats("b", {10}, 1)}, 40,
                          result, error));
  EXPECT_NE(error.find("model.safetensors is left from an earlier export"),
            std::string::npos)
      << error;
  EXPECT_EQ(readAll(dir + "/model.safetensors"), before);
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"model.safetensors"});

  // Bad tensors: nothing written, nothing left behind.
  EXPECT_FALSE(writeModel(dir, {floats("a", {1}, 0), floats("a", {1}, 0)}, 1000,
                          result, error));
  EXPECT_NE(error.find("two tensors are named 'a'"), std::string::npos);
  EXPECT_FALSE(writeModel(dir, {floats("n", {-1}, 0)}, 1000, result, error));
  EXPECT_NE(error.find("invalid or oversized shape"), std::string::npos);
  EXPECT_FALSE(writeModel(dir, {floats("huge", {INT64_MAX, 4}, 0)}, 1000,
                          result, error));
  EXPECT_FALSE(writeModel(dir, {}, 1000, result, error));
  Tensor failing = floats("f", {4}, 0);
  failing.read = [](std::string &, std::string &error) {
    error = "disk on fire";
    return false;
  };
  EXPECT_FALSE(writeModel(dir, {failing}, 1000, result, error));
  EXPECT_NE(error.find("disk on fire"), std::string::npos);
  Tensor shortRead = floats("s", {4}, 0);
  shortRead.read = [](std::string &bytes, std::string &) {
    bytes = "abc";
    return true;
  };
  EXPECT_FALSE(writeModel(dir, {shortRead}, 1000, result, error));
  EXPECT_NE(error.find("has 3 bytes"), std::string::npos);
  EXPECT_EQ(readAll(dir + "/model.safetensors"), before)
      << "a failed write leaves the earlier file";
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"model.safetensors"});
}

TEST(Json, QuoteEscapesWhatJsonNeeds) {
  EXPECT_EQ(json::quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\u000a\\u0001\"");
  json::Value v;
  std::string error;
  ASSERT_TRUE(json::parse(json::quote("tab\there \xc3\xa9"), v, error));
  EXPECT_EQ(v.string, "tab\there \xc3\xa9");
}

} // namespace
