// DataParallel.h - What a rank of a data-parallel run sets up before it
// opens its artifact (strata-run and the Python module alike).

#ifndef STRATA_RUNTIME_TRAIN_DATAPARALLEL_H
#define STRATA_RUNTIME_TRAIN_DATAPARALLEL_H

#include "runtime/comm/Communicator.h"

#include <string>
#include <vector>

namespace strata::trainer {

/// The SSD directories rank `comm.rank()` of `comm.size()` keeps its SSD
/// tensors in: `DIR/rank-R` under each of `ssdDirs` (the plan's own when
/// empty), created; the ranks' stores must not share files. Unchanged for
/// one process or a plan without SSD tensors. False with `error` when the
/// plan cannot be read or a directory not made.
bool rankSsdDirs(const std::string &artifactDir, const comm::Communicator &comm,
                 std::vector<std::string> &ssdDirs, std::string &error);

} // namespace strata::trainer

#endif // STRATA_RUNTIME_TRAIN_DATAPARALLEL_H
