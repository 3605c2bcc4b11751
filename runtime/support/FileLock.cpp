// FileLock.cpp - Advisory locks between Strata processes.

#include "runtime/support/FileLock.h"
#include "runtime/support/FileUtil.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace strata {

namespace {

/// The flocks this process holds: lock file identity -> (fd, holders).
struct HeldLocks {
  std::mutex mutex;
  std::map<std::pair<uint64_t, uint64_t>, std::pair<int, int>> byFile;
  /// The process the entries belong to: a forked child inherits the map
  /// but not the right to the parent's locks.
  pid_t owner = 0;
};

HeldLocks &heldLocks() {
  static HeldLocks *locks = new HeldLocks(); // Never destroyed: used at exit.
  return *locks;
}

} // namespace

FileLock::~FileLock() { release(); }

FileLock::FileLock(FileLock &&other) noexcept
    : device_(other.device_), inode_(other.inode_), held_(other.held_) {
  other.held_ = false;
}

FileLock &FileLock::operator=(FileLock &&other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    inode_ = other.inode_;
    held_ = other.held_;
    other.held_ = false;
  }
  return *this;
}

void FileLock::release() {
  if (!held_)
    return;
  held_ = false;
  HeldLocks &locks = heldLocks();
  std::lock_guard<std::mutex> guard(locks.mutex);
  if (locks.owner != ::getpid())
    return; // Held by the parent this process was forked from.
  auto it = locks.byFile.find({device_, inode_});
  if (it == locks.byFile.end())
    return;
  if (--it->second.second == 0) {
    ::close(it->second.first); // Closing the descriptor drops the flock.
    locks.byFile.erase(it);
  }
}

bool FileLock::lockDirectory(const std::string &dir, Mode mode,
                             const std::string &purpose, std::string &error) {
  release();
  std::string path = dir + "/" + kLockFileName;
  int fd =
      ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0 && (errno == EACCES || errno == EROFS))
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    error = "cannot lock '" + dir + "' (" + path + "): " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    error = "cannot lock '" + path + "': " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  HeldLocks &locks = heldLocks();
  std::lock_guard<std::mutex> guard(locks.mutex);
  if (locks.owner != ::getpid()) {
    locks.byFile.clear();
    locks.owner = ::getpid();
  }
  auto key = std::make_pair(static_cast<uint64_t>(st.st_dev),
                            static_cast<uint64_t>(st.st_ino));
  auto known = locks.byFile.find(key);
  if (known != locks.byFile.end()) { // This process holds it already.
    ::close(fd);
    ++known->second.second;
    device_ = key.first;
    inode_ = key.second;
    held_ = true;
    return true;
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
  locks.byFile[key] = {fd, 1};
  device_ = key.first;
  inode_ = key.second;
  held_ = true;
  return true;
}

} // namespace strata
