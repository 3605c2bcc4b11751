// FileLock.cpp - Advisory locks between Strata processes.

#include "runtime/support/FileLock.h"
#include "runtime/support/FileUtil.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace strata {

FileLock::~FileLock() { release(); }

FileLock::FileLock(FileLock &&other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

FileLock &FileLock::operator=(FileLock &&other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void FileLock::release() {
  if (fd_ >= 0)
    ::close(fd_); // Closing the descriptor drops the flock.
  fd_ = -1;
}

bool FileLock::lockDirectory(const std::string &dir, Mode mode,
                             const std::string &purpose, std::string &error) {
  release();
  std::string path = dir + "/" + kLockFileName;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                  0644);
  if (fd < 0 && (errno == EACCES || errno == EROFS))
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    error = "cannot lock '" + dir + "' (" + path + "): " +
            std::strerror(errno);
    return false;
  }
  int op = (mode == Mode::Exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB;
  int rc;
  do
    rc = ::flock(fd, op);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int savedErrno = errno;
    std::string holder;
    char buf[256];
    ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    if (n > 0) {
      buf[n] = '\0';
      holder = buf;
      while (!holder.empty() &&
             (holder.back() == '\n' || holder.back() == '\0'))
        holder.pop_back();
    }
    ::close(fd);
    if (savedErrno == EWOULDBLOCK)
      error = "'" + dir + "' is in use by another Strata process" +
              (holder.empty() ? std::string() : " (" + holder + ")") +
              "; wait for it to finish, or use another directory";
    else
      error = "cannot lock '" + path + "': " + std::strerror(savedErrno);
    return false;
  }
  if (mode == Mode::Exclusive) {
    // Who holds it, for the message a second process prints. Best effort:
    // the lock itself is what protects the files.
    std::string who =
        "pid " + std::to_string(::getpid()) + ", " + purpose + "\n";
    if (::ftruncate(fd, 0) == 0)
      (void)!::pwrite(fd, who.data(), who.size(), 0);
  }
  fd_ = fd;
  return true;
}

} // namespace strata
