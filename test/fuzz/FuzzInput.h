// FuzzInput.h - Hands a fuzzer's bytes to readers that take a path.
//
// The readers under test open files by name (and check that they are
// regular files), so each input goes into an anonymous memory file whose
// /proc/self/fd path they can open; nothing touches the disk.

#ifndef STRATA_TEST_FUZZ_FUZZINPUT_H
#define STRATA_TEST_FUZZ_FUZZINPUT_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace strata::fuzz {

class MemoryFile {
public:
  MemoryFile(const uint8_t *data, size_t size) {
    fd_ = ::memfd_create("strata-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    size_t done = 0;
    while (done < size) {
      ssize_t w = ::write(fd_, data + done, size - done);
      if (w <= 0) {
        std::perror("write");
        std::abort();
      }
      done += static_cast<size_t>(w);
    }
  }
  ~MemoryFile() { ::close(fd_); }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

private:
  int fd_ = -1;
};

} // namespace strata::fuzz

#endif // STRATA_TEST_FUZZ_FUZZINPUT_H
