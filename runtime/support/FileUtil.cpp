// FileUtil.cpp - Small file helpers.

#include "runtime/support/FileUtil.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace strata {

void ignoreFileSizeSignal() { std::signal(SIGXFSZ, SIG_IGN); }

bool writeAll(int fd, const void *data, size_t size) {
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t w = ::write(fd, p, size);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += w;
    size -= static_cast<size_t>(w);
  }
  return true;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = fd;
}

bool preadAll(int fd, void *out, size_t size, uint64_t offset) {
  char *p = static_cast<char *>(out);
  while (size > 0) {
    ssize_t r = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      if (r == 0)
        errno = 0;
      return false;
    }
    p += r;
    size -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

UniqueFd openRegularFile(const std::string &path, const std::string &what,
                         uint64_t &size, std::string &error) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer forever.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    error = "cannot open " + what + " '" + path + "': " + std::strerror(errno);
    return UniqueFd();
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    error = "cannot read " + what + " '" + path + "': " + std::strerror(errno);
    return UniqueFd();
  }
  if (!S_ISREG(st.st_mode)) {
    error = what + " '" + path + "' is not a regular file" +
            (S_ISDIR(st.st_mode)    ? " (a directory)"
             : S_ISFIFO(st.st_mode) ? " (a FIFO; save the data to a file)"
                                    : "");
    return UniqueFd();
  }
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0)
    ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

bool readRegularFile(const std::string &path, const std::string &what,
                     uint64_t maxBytes, std::string &out, std::string &error) {
  uint64_t size = 0;
  UniqueFd fd = openRegularFile(path, what, size, error);
  if (fd.get() < 0)
    return false;
  if (size > maxBytes) {
    error = what + " '" + path + "' is " + std::to_string(size) +
            " bytes, more than the " + std::to_string(maxBytes) +
            " it may have";
    return false;
  }
  out.assign(size, '\0');
  errno = 0;
  if (!preadAll(fd.get(), out.data(), size, 0)) {
    error = "cannot read " + what + " '" + path +
            "': " + (errno ? std::strerror(errno) : "it shrank while read");
    return false;
  }
  return true;
}

static std::string parentOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool syncDirectory(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return false;
  // Some file systems cannot fsync a directory (EINVAL): nothing to do.
  bool ok = ::fsync(fd) == 0 || errno == EINVAL;
  int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

bool writeFileAtomically(const std::string &path, const void *data, size_t size,
                         std::string &error) {
  return writeFileAtomically(path, {FilePiece{data, size}}, error);
}

bool writeFileAtomically(const std::string &path,
                         const std::vector<FilePiece> &pieces,
                         std::string &error) {
  AtomicFileWriter out;
  if (!out.open(path, error))
    return false;
  for (const FilePiece &piece : pieces)
    if (!out.write(piece.data, piece.size, error))
      return false;
  return out.commit(error);
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
  fd_ = -1;
}

bool AtomicFileWriter::open(const std::string &path, std::string &error) {
  discard();
  path_ = path;
  tmp_ = path + ".tmp." + std::to_string(::getpid());
  size_ = 0;
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    error = "cannot create '" + tmp_ + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

bool AtomicFileWriter::write(const void *data, size_t size,
                             std::string &error) {
  if (fd_ < 0) {
    error = "cannot write '" + path_ + "': not open";
    return false;
  }
  if (!writeAll(fd_, data, size)) {
    error = "cannot write '" + path_ + "': " + std::strerror(errno);
    discard();
    return false;
  }
  size_ += size;
  return true;
}

bool AtomicFileWriter::commit(std::string &error) {
  if (fd_ < 0) {
    error = "cannot write '" + path_ + "': not open";
    return false;
  }
  bool ok = ::fsync(fd_) == 0;
  int savedErrno = errno;
  ok = (::close(fd_) == 0) && ok;
  fd_ = -1;
  if (!ok) {
    error = "cannot write '" + path_ + "': " + std::strerror(savedErrno);
    ::unlink(tmp_.c_str());
    return false;
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    error = "cannot rename '" + tmp_ + "' to '" + path_ +
            "': " + std::strerror(errno);
    ::unlink(tmp_.c_str());
    return false;
  }
  if (!syncDirectory(parentOf(path_))) {
    error = "wrote '" + path_ + "' but cannot make it durable (fsync of " +
            parentOf(path_) + "): " + std::strerror(errno);
    return false;
  }
  return true;
}

bool pathExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool makeDirectories(const std::string &path, std::string &error) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty())
      continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      error =
          "cannot create directory '" + partial + "': " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

} // namespace strata
