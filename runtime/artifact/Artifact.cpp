// Artifact.cpp - Opening a compiled artifact directory.

#include "runtime/artifact/Artifact.h"
#include "runtime/support/Crc32c.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace strata::artifact {

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0)
    return;
  size_t rounded = (bytes + kParamAlignment - 1) / kParamAlignment *
                   kParamAlignment;
  data_ = static_cast<char *>(std::aligned_alloc(kParamAlignment, rounded));
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AlignedBuffer::AlignedBuffer(AlignedBuffer &&other) noexcept
    : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

AlignedBuffer &AlignedBuffer::operator=(AlignedBuffer &&other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

bool Artifact::open(const std::string &dir, std::string &error) {
  dir_ = dir;
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    error = "'" + dir + "' is not an artifact directory (compile one with "
            "strata-compile model.onnx -o " + dir + ")";
    return false;
  }
  if (!readPlan(dir + "/plan.bin", plan_, error))
    return false;
  std::string path = dir + "/params.bin";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  if (::fstat(fd, &st) != 0 ||
      static_cast<uint64_t>(st.st_size) != plan_.paramsBytes) {
    ::close(fd);
    error = "'" + path + "' is " + std::to_string(st.st_size) +
            " bytes, the plan expects " + std::to_string(plan_.paramsBytes) +
            " (truncated or from another compile)";
    return false;
  }
  params_ = AlignedBuffer(plan_.paramsBytes);
  if (!params_.valid()) {
    ::close(fd);
    error = "out of memory reading " + std::to_string(plan_.paramsBytes) +
            " bytes of parameters";
    return false;
  }
  size_t done = 0;
  while (done < plan_.paramsBytes) {
    ssize_t r = ::pread(fd, params_.data() + done, plan_.paramsBytes - done,
                        static_cast<off_t>(done));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      ::close(fd);
      error = "cannot read '" + path + "': " +
              (r < 0 ? std::strerror(errno) : "unexpected end of file");
      return false;
    }
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  for (const ParamEntry &p : plan_.params) {
    if (crc32c(params_.data() + p.fileOffset, p.bytes) != p.crc) {
      error = "'" + path + "': parameter '" + p.name +
              "' is corrupted (checksum mismatch)";
      return false;
    }
  }
  return true;
}

} // namespace strata::artifact
