//===- OptionsTd.cpp - The pipelines' options as ODS pass options --------===//
//
// A build-time generator: writes every option TierOptions::bind and
// TrainingOptions::bind declare (PipelineOptions.h) as an ODS `Option`
// def, which Passes.td includes and the passes list, so that an option a
// pipeline and its passes share is declared once, in bind(): one name,
// one type, one default and one help text everywhere. The def of flag
// `place-params` is `PlaceParamsOption`, and its pass member (and its
// TierOptions field) `placeParams`: the flag in camel case. A byte count
// (`b.size`) is a ByteCount in a pass, which takes KiB/MiB/GiB/TiB as the
// pipelines and strata-compile do.
//
// Usage: strata-options-td OUT.td (rewritten only when it changes, so that
// a rebuild of this tool does not rebuild every pass).
//
//===----------------------------------------------------------------------===//

#include "passes/PipelineOptions.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

using namespace strata;

namespace {

/// `text` as a string literal, which TableGen and C++ escape alike (an
/// ODS default is a C++ expression inside a TableGen string, so a string
/// default is quoted twice).
std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

/// The shortest decimal that reads back as `value`.
std::string shortest(double value) {
  char buffer[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  return buffer;
}

/// "place-params" -> "placeParams" (upper: "PlaceParams").
std::string camel(const std::string &flag, bool upper) {
  std::string out;
  bool next = upper;
  for (char c : flag) {
    if (c == '-') {
      next = true;
      continue;
    }
    out += next ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                : c;
    next = false;
  }
  return out;
}

struct Writer {
  std::ostringstream &os;
  const char *from;

  void emit(const OptionInfo &info, const char *type,
            const std::string &initial) {
    os << "// " << from << ": --" << info.name << "\n"
       << "def " << camel(info.name, true) << "Option : Option<"
       << quoted(camel(info.name, false)) << ", " << quoted(info.name) << ", "
       << quoted(type) << ",\n    /*default=*/" << quoted(initial) << ",\n    "
       << quoted(info.help) << ">;\n";
  }
  void operator()(std::string &field, const OptionInfo &info) {
    emit(info, "std::string", quoted(field));
  }
  void operator()(bool &field, const OptionInfo &info) {
    emit(info, "bool", field ? "true" : "false");
  }
  void operator()(int64_t &field, const OptionInfo &info) {
    emit(info, "int64_t", std::to_string(field));
  }
  void operator()(double &field, const OptionInfo &info) {
    emit(info, "double", shortest(field));
  }
  void size(uint64_t &field, const OptionInfo &info) {
    emit(info, "::strata::ByteCount", std::to_string(field));
  }
};

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.td\n", argv[0]);
    return 2;
  }
  std::ostringstream os;
  os << "// The pipelines' options as ODS pass options, generated from\n"
        "// passes/PipelineOptions.h by strata-options-td: do not edit.\n\n"
        "#ifndef STRATA_PASSES_PIPELINEOPTIONS_TD\n"
        "#define STRATA_PASSES_PIPELINEOPTIONS_TD\n\n"
        "include \"mlir/Pass/PassBase.td\"\n\n";
  TierOptions tiers;
  Writer tierWriter{os, "TierOptions"};
  tiers.bind(tierWriter);
  TrainingOptions training;
  Writer trainingWriter{os, "TrainingOptions"};
  training.bind(trainingWriter);
  os << "\n#endif // STRATA_PASSES_PIPELINEOPTIONS_TD\n";

  std::string text = os.str();
  {
    std::ifstream old(argv[1], std::ios::binary);
    std::ostringstream have;
    have << old.rdbuf();
    if (old && have.str() == text)
      return 0;
  }
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::fprintf(stderr, "strata-options-td: cannot write %s: %s\n", argv[1],
                 std::strerror(errno));
    return 1;
  }
  return 0;
}
