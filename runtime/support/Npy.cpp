// Npy.cpp - Reading and writing NumPy .npy files.

#include "runtime/support/Npy.h"
#include "runtime/support/FileUtil.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace strata::npy {

namespace {

struct DTypeInfo {
  DType dtype;
  const char *descr;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "<f4"}, {DType::F64, "<f8"}, {DType::F16, "<f2"},
    {DType::I64, "<i8"}, {DType::I32, "<i4"}, {DType::I16, "<i2"},
    {DType::I8, "|i1"},  {DType::U8, "|u1"},  {DType::U16, "<u2"},
    {DType::U32, "<u4"}, {DType::U64, "<u8"}, {DType::Bool, "|b1"},
};

/// Finds `'key': value` in the header dict and returns the raw value text.
bool headerField(const std::string &header, const std::string &key,
                 std::string &value) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos)
    return false;
  size_t colon = header.find(':', k);
  if (colon == std::string::npos)
    return false;
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos)
    return false;
  size_t end;
  if (header[start] == '(') {
    end = header.find(')', start);
    if (end == std::string::npos)
      return false;
    ++end;
  } else if (header[start] == '\'') {
    end = header.find('\'', start + 1);
    if (end == std::string::npos)
      return false;
    ++end;
  } else {
    end = header.find_first_of(",}", start);
  }
  value = header.substr(start, end - start);
  return true;
}

} // namespace

std::string dtypeDescr(DType dtype) {
  for (const DTypeInfo &i : kDTypes)
    if (i.dtype == dtype)
      return i.descr;
  return "";
}

int64_t Array::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool readFile(const std::string &path, Array &array, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  auto fail = [&](const std::string &why) {
    error = "'" + path + "' is not a readable .npy file: " + why;
    return false;
  };
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    return fail("bad magic (not an .npy file)");
  int major = static_cast<unsigned char>(magic[6]);
  uint32_t headerLen = 0;
  if (major == 1) {
    unsigned char len[2];
    if (!in.read(reinterpret_cast<char *>(len), 2))
      return fail("truncated header");
    headerLen = len[0] | (len[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char len[4];
    if (!in.read(reinterpret_cast<char *>(len), 4))
      return fail("truncated header");
    headerLen = len[0] | (len[1] << 8) | (len[2] << 16) |
                (static_cast<uint32_t>(len[3]) << 24);
  } else {
    return fail("unsupported format version " + std::to_string(major));
  }
  if (headerLen > (1u << 20))
    return fail("header too large");
  std::string header(headerLen, '\0');
  if (!in.read(header.data(), headerLen))
    return fail("truncated header");

  std::string descr, order, shape;
  if (!headerField(header, "descr", descr) ||
      !headerField(header, "fortran_order", order) ||
      !headerField(header, "shape", shape))
    return fail("header lacks descr, fortran_order or shape");
  if (order.rfind("True", 0) == 0)
    return fail("Fortran order is not supported (save a C-contiguous array)");
  if (descr.size() < 2)
    return fail("bad descr");
  descr = descr.substr(1, descr.size() - 2);
  // '=' is native (little-endian on every supported machine).
  if (!descr.empty() && descr[0] == '=')
    descr[0] = '<';
  bool found = false;
  for (const DTypeInfo &i : kDTypes) {
    if (descr == i.descr ||
        (dtypeSize(i.dtype) == 1 && descr.size() == 3 &&
         descr.substr(1) == std::string(i.descr).substr(1))) {
      array.dtype = i.dtype;
      found = true;
      break;
    }
  }
  if (!found)
    return fail("unsupported dtype '" + descr +
                "' (big-endian or not a numeric type)");

  array.shape.clear();
  std::string dims = shape.substr(1, shape.size() - 2);
  std::stringstream ss(dims);
  std::string part;
  while (std::getline(ss, part, ',')) {
    size_t a = part.find_first_not_of(' ');
    if (a == std::string::npos)
      continue;
    size_t b = part.find_last_not_of(' ');
    std::string num = part.substr(a, b - a + 1);
    if (num.find_first_not_of("0123456789") != std::string::npos)
      return fail("bad shape '" + shape + "'");
    array.shape.push_back(std::stoll(num));
  }
  size_t bytes = static_cast<size_t>(array.numElements()) * dtypeSize(array.dtype);
  array.data.resize(bytes);
  if (bytes && !in.read(array.data.data(), bytes))
    return fail("truncated data: expected " + std::to_string(bytes) +
                " bytes for " + dtypeName(array.dtype) + " " +
                shapeString(array.shape));
  return true;
}

bool writeFile(const std::string &path, const Array &array,
               std::string &error) {
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i)
    shape += std::to_string(array.shape[i]) + ", ";
  if (array.shape.size() > 1)
    shape.erase(shape.size() - 2);
  else if (array.shape.size() == 1)
    shape.erase(shape.size() - 1);
  shape += ")";
  if (dtypeDescr(array.dtype).empty()) {
    error = std::string("NumPy has no ") + dtypeName(array.dtype) + " type";
    return false;
  }
  std::string header = "{'descr': '" + dtypeDescr(array.dtype) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that the data starts 64-byte aligned; the header ends in '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 65535) {
    error = "header too large for .npy version 1.0";
    return false;
  }
  size_t expected =
      static_cast<size_t>(array.numElements()) * dtypeSize(array.dtype);
  if (array.data.size() != expected) {
    error = "array data has " + std::to_string(array.data.size()) +
            " bytes, expected " + std::to_string(expected);
    return false;
  }

  std::string file = "\x93NUMPY";
  file += static_cast<char>(1);
  file += static_cast<char>(0);
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>(header.size() >> 8);
  file += header;
  file.append(array.data.data(), array.data.size());
  return writeFileAtomically(path, file.data(), file.size(), error);
}

} // namespace strata::npy
