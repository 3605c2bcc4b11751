// Backend.cpp - What every backend shares by default.

#include "runtime/backends/Backend.h"

namespace strata::runtime {

bool Backend::supports(const artifact::Plan &, std::string &) const {
  return true;
}

} // namespace strata::runtime
