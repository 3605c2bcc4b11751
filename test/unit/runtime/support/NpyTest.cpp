// NpyTest.cpp - .npy reading and writing against hand-built files.

#include "runtime/support/Npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace strata;
using namespace strata::npy;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(getpid());
}

// Writes a version-1.0 file the way numpy.save does.
void writeRaw(const std::string &path, const std::string &header,
              const std::string &data) {
  std::string h = header;
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  std::ofstream out(path, std::ios::binary);
  out << "\x93NUMPY" << char(1) << char(0) << char(h.size() & 0xff)
      << char(h.size() >> 8) << h << data;
}

TEST(Npy, ReadsNumpyFloat32Matrix) {
  std::string path = tempPath("f32");
  float values[6] = {1, 2, 3, 4, 5, 6.5f};
  writeRaw(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
           std::string(reinterpret_cast<char *>(values), sizeof(values)));
  Array a;
  std::string error;
  ASSERT_TRUE(readFile(path, a, error)) << error;
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(a.data.size(), sizeof(values));
  EXPECT_EQ(std::memcmp(a.data.data(), values, sizeof(values)), 0);
  std::remove(path.c_str());
}

TEST(Npy, RoundTripsScalarsAndVectors) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {5}, {2, 1, 3}}) {
    Array a;
    a.dtype = DType::I64;
    a.shape = shape;
    a.data.resize(a.numElements() * 8);
    for (int64_t i = 0; i < a.numElements(); ++i) {
      int64_t v = i * 1000003 - 7;
      std::memcpy(a.data.data() + i * 8, &v, 8);
    }
    std::string path = tempPath("rt"), error;
    ASSERT_TRUE(writeFile(path, a, error)) << error;
    Array b;
    ASSERT_TRUE(readFile(path, b, error)) << error;
    EXPECT_EQ(b.dtype, DType::I64);
    EXPECT_EQ(b.shape, shape);
    EXPECT_EQ(b.data, a.data);
    std::remove(path.c_str());
  }
}

TEST(Npy, RejectsTruncatedData) {
  std::string path = tempPath("trunc");
  writeRaw(path, "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }",
           std::string(12, '\0'));
  Array a;
  std::string error;
  EXPECT_FALSE(readFile(path, a, error));
  EXPECT_NE(error.find("truncated data"), std::string::npos) << error;
  std::remove(path.c_str());
}

TEST(Npy, RejectsFortranOrderAndBigEndian) {
  std::string path = tempPath("bad");
  Array a;
  std::string error;
  writeRaw(path, "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }",
           std::string(4, '\0'));
  EXPECT_FALSE(readFile(path, a, error));
  EXPECT_NE(error.find("Fortran"), std::string::npos) << error;
  writeRaw(path, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
           std::string(4, '\0'));
  EXPECT_FALSE(readFile(path, a, error));
  EXPECT_NE(error.find("unsupported dtype"), std::string::npos) << error;
  std::remove(path.c_str());
}

TEST(Npy, MissingFileNamesThePath) {
  Array a;
  std::string error;
  EXPECT_FALSE(readFile("/nonexistent/x.npy", a, error));
  EXPECT_NE(error.find("/nonexistent/x.npy"), std::string::npos) << error;
}

} // namespace
