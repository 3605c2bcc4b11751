// Npy.cpp - Reading and writing NumPy .npy files.

#include "runtime/support/Npy.h"
#include "runtime/support/Checked.h"
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
  // Arrays are built from checked shapes; an unchecked one counts as -1.
  return checkedNumElements(shape).value_or(-1);
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool readFile(const std::string &path, Array &array, std::string &error) {
  uint64_t fileSize = 0;
  UniqueFd fd = openRegularFile(path, "array file", fileSize, error);
  if (fd.get() < 0)
    return false;
  auto fail = [&](const std::string &why) {
    error = "'" + path + "' is not a readable .npy file: " + why;
    return false;
  };
  uint64_t pos = 0;
  auto read = [&](void *out, size_t n) {
    if (!preadAll(fd.get(), out, n, pos))
      return false;
    pos += n;
    return true;
  };
  char magic[8];
  if (!read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    return fail("bad magic (not an .npy file)");
  int major = static_cast<unsigned char>(magic[6]);
  uint32_t headerLen = 0;
  if (major == 1) {
    unsigned char len[2];
    if (!read(len, 2))
      return fail("truncated header");
    headerLen = len[0] | (len[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char len[4];
    if (!read(len, 4))
      return fail("truncated header");
    headerLen = len[0] | (len[1] << 8) | (len[2] << 16) |
                (static_cast<uint32_t>(len[3]) << 24);
  } else {
    return fail("unsupported format version " + std::to_string(major));
  }
  if (headerLen > (1u << 20))
    return fail("header too large");
  std::string header(headerLen, '\0');
  if (!read(header.data(), headerLen))
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
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')')
    return fail("bad shape '" + shape + "'");
  std::string dims = shape.substr(1, shape.size() - 2);
  std::stringstream ss(dims);
  std::string part;
  while (std::getline(ss, part, ',')) {
    size_t a = part.find_first_not_of(' ');
    if (a == std::string::npos)
      continue;
    size_t b = part.find_last_not_of(' ');
    std::string num = part.substr(a, b - a + 1);
    int64_t dim;
    if (!parseInt64(num, dim, 0))
      return fail("bad shape '" + shape + "' (dimension '" + num + "')");
    array.shape.push_back(dim);
  }
  // The size is checked against the file before anything is allocated: a
  // header may claim any shape.
  std::optional<uint64_t> bytes =
      checkedByteSize(array.shape, dtypeSize(array.dtype));
  if (!bytes)
    return fail("shape " + shapeString(array.shape) + " of " +
                dtypeName(array.dtype) + " overflows a 64-bit byte count");
  if (*bytes > fileSize - std::min(fileSize, pos))
    return fail("truncated data: expected " + std::to_string(*bytes) +
                " bytes for " + dtypeName(array.dtype) + " " +
                shapeString(array.shape) + ", the file has " +
                std::to_string(fileSize - std::min(fileSize, pos)));
  array.data.resize(*bytes);
  if (*bytes && !read(array.data.data(), *bytes))
    return fail("cannot read the data: " +
                std::string(errno ? std::strerror(errno) : "end of file"));
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
  std::optional<uint64_t> expected =
      checkedByteSize(array.shape, dtypeSize(array.dtype));
  if (!expected || array.data.size() != *expected) {
    error = "array data has " + std::to_string(array.data.size()) +
            " bytes, expected " +
            (expected ? std::to_string(*expected) : "(overflow)");
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
