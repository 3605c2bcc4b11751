//===- DriverFlags.h - Pipeline options as strata-compile's flags -*- C++
//-*-===//
//
// Binds an options struct of passes/PipelineOptions.h to the command line:
// one flag per option bind() declares (not the pipeline-only ones), storing
// straight into the struct's field, with the declared name and help. Byte
// counts are read as text (with KiB/MiB/GiB/TiB) and converted by
// finish(), which says what is wrong with a value.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_COMPILER_TOOLS_STRATA_COMPILE_DRIVERFLAGS_H
#define STRATA_COMPILER_TOOLS_STRATA_COMPILE_DRIVERFLAGS_H

#include "passes/PipelineOptions.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"

#include <memory>
#include <string>
#include <vector>

namespace strata::compile {

class DriverFlags {
public:
  explicit DriverFlags(llvm::cl::OptionCategory &category)
      : category(category) {}

  template <typename T> void operator()(T &field, const OptionInfo &info) {
    if (info.pipelineOnly)
      return;
    auto flag = std::make_shared<llvm::cl::opt<T, /*ExternalStorage=*/true>>(
        llvm::StringRef(info.name), llvm::cl::desc(info.help),
        llvm::cl::location(field), llvm::cl::cat(category));
    if (info.hidden)
      flag->setHiddenFlag(llvm::cl::Hidden);
    flags[info.name] = flag.get();
    held.push_back(flag);
  }

  void size(uint64_t &field, const OptionInfo &info) {
    auto flag = std::make_shared<llvm::cl::opt<std::string>>(
        llvm::StringRef(info.name), llvm::cl::desc(info.help),
        llvm::cl::init(""), llvm::cl::cat(category));
    flags[info.name] = flag.get();
    held.push_back(flag);
    sizes.push_back({info.name, flag.get(), &field});
  }

  /// Whether the command line named `name`.
  bool given(llvm::StringRef name) const {
    auto it = flags.find(name);
    return it != flags.end() && it->second->getNumOccurrences() > 0;
  }

  /// A flag given an empty value ('--gpu-mem=', an unset shell variable)
  /// would read as not given: the first such one, or "".
  std::string emptySize() const {
    for (const Size &s : sizes)
      if (s.text->getNumOccurrences() > 0 && s.text->empty())
        return s.name;
    return "";
  }

  /// Converts the byte counts given into their fields; the first error, or
  /// "" when every one is a positive byte count.
  std::string finish() const {
    for (const Size &s : sizes) {
      const std::string &text = s.text->getValue();
      if (text.empty())
        continue;
      uint64_t bytes = 0;
      if (!parseOptionSize(text, bytes))
        return "--" + s.name + ": invalid size '" + text +
               "' (a byte count under 2^63, e.g. 24GiB)";
      // 0 would read as "no budget" downstream: say so instead of guessing.
      if (bytes == 0)
        return "--" + s.name + " must be positive (leave it out for no limit)";
      *s.field = bytes;
    }
    return "";
  }

private:
  struct Size {
    std::string name;
    llvm::cl::opt<std::string> *text;
    uint64_t *field;
  };
  llvm::cl::OptionCategory &category;
  llvm::StringMap<llvm::cl::Option *> flags;
  std::vector<Size> sizes;
  std::vector<std::shared_ptr<void>> held;
};

} // namespace strata::compile

#endif // STRATA_COMPILER_TOOLS_STRATA_COMPILE_DRIVERFLAGS_H
