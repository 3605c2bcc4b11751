// Size.cpp - Byte sizes as people write them.

#include "runtime/support/Size.h"
#include "runtime/support/Checked.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace strata {

bool parseSize(const std::string &text, uint64_t &bytes) {
  size_t i = 0;
  while (i < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0)
    return false;
  // All of the number, not its longest valid prefix: "1.5.3GiB" is refused.
  double value;
  if (!parseFiniteDouble(text.substr(0, i), value))
    return false;
  std::string unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ')
    unit.erase(unit.begin());
  double scale;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K" || unit == "KiB")
    scale = 1024.0;
  else if (unit == "M" || unit == "MiB")
    scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TiB")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "KB")
    scale = 1e3;
  else if (unit == "MB")
    scale = 1e6;
  else if (unit == "GB")
    scale = 1e9;
  else if (unit == "TB")
    scale = 1e12;
  else
    return false;
  // Sizes are int64 products downstream: refuse anything from 2^63 on
  // (the double compare is exact there), before the conversion that would
  // be undefined past it.
  double result = std::round(value * scale);
  if (!(result >= 0) || result >= 9223372036854775808.0)
    return false;
  bytes = static_cast<uint64_t>(result);
  return true;
}

std::string formatSize(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof(buf), "%llu B",
                  static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof(buf), "%.2f %s", v, units[u]);
  return buf;
}

} // namespace strata
