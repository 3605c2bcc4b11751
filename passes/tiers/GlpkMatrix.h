//===- GlpkMatrix.h - A GLPK matrix built entry by entry --------*- C++ -*-===//
//
// The tier planner's programmes (TierSolve.cpp's integer programme,
// PlacementBound.cpp's relaxation) add their coefficients one (row, column)
// at a time, sometimes to the same entry twice. glp_load_matrix refuses a
// duplicate by aborting the process, so the entries are summed here and
// loaded once. Include only where GLPK is (STRATA_HAVE_GLPK).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_PASSES_TIERS_GLPKMATRIX_H
#define STRATA_PASSES_TIERS_GLPKMATRIX_H

#include <glpk.h>

#include <map>
#include <utility>
#include <vector>

namespace strata {

class GlpkMatrix {
public:
  /// Adds `value` to the coefficient at (`row`, `col`), 1-based as GLPK's.
  void add(int row, int col, double value) {
    if (value != 0)
      entries[{row, col}] += value;
  }
  /// Replaces `lp`'s constraint matrix with these coefficients.
  void load(glp_prob *lp) const {
    std::vector<int> ia{0}, ja{0};
    std::vector<double> ar{0};
    for (const auto &[at, value] : entries) {
      ia.push_back(at.first);
      ja.push_back(at.second);
      ar.push_back(value);
    }
    glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(),
                    ar.data());
  }

private:
  std::map<std::pair<int, int>, double> entries;
};

} // namespace strata

#endif // STRATA_PASSES_TIERS_GLPKMATRIX_H
