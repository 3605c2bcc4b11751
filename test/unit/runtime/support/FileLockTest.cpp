// FileLockTest.cpp - Locks between processes, shared within one.

#include "runtime/support/FileLock.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace strata;

namespace {

std::string tempDir() {
  std::string tmpl = ::testing::TempDir() + "/lockXXXXXX";
  return ::mkdtemp(tmpl.data());
}

/// Whether a child process can lock `dir` (exit status 0: it could).
bool otherProcessCanLock(const std::string &dir) {
  pid_t pid = ::fork();
  if (pid == 0) {
    FileLock lock;
    std::string error;
    ::_exit(
        lock.lockDirectory(dir, FileLock::Mode::Exclusive, "child", error) ? 0
        : error.find("in use by another Strata process") != std::string::npos
            ? 1
            : 2);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 2) << "the refusal does not say why";
  return WEXITSTATUS(status) == 0;
}

TEST(FileLock, RefusesASecondProcessAndSharesWithinOne) {
  std::string dir = tempDir(), error;
  {
    FileLock first;
    ASSERT_TRUE(
        first.lockDirectory(dir, FileLock::Mode::Exclusive, "test", error))
        << error;
    EXPECT_FALSE(otherProcessCanLock(dir));
    {
      FileLock again; // The same process, another purpose.
      ASSERT_TRUE(
          again.lockDirectory(dir, FileLock::Mode::Exclusive, "again", error))
          << error;
    }
    // Releasing the second holder keeps the first one's lock.
    EXPECT_FALSE(otherProcessCanLock(dir));
  }
  EXPECT_TRUE(otherProcessCanLock(dir));
}

TEST(FileLock, NamesTheHolder) {
  std::string dir = tempDir(), error;
  FileLock lock;
  ASSERT_TRUE(
      lock.lockDirectory(dir, FileLock::Mode::Exclusive, "training it", error));
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    FileLock other;
    std::string why;
    other.lockDirectory(dir, FileLock::Mode::Exclusive, "child", why);
    (void)!::write(pipeFds[1], why.data(), why.size());
    ::_exit(0);
  }
  ::close(pipeFds[1]);
  char buf[512] = {};
  ssize_t n = ::read(pipeFds[0], buf, sizeof(buf) - 1);
  ::waitpid(pid, nullptr, 0);
  ASSERT_GT(n, 0);
  std::string message(buf, n);
  EXPECT_NE(message.find("pid " + std::to_string(::getpid())),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("training it"), std::string::npos) << message;
}

} // namespace
