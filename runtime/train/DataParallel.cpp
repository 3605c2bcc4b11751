// DataParallel.cpp - A rank's own SSD directories.

#include "runtime/train/DataParallel.h"

#include "runtime/artifact/Plan.h"
#include "runtime/support/FileUtil.h"

namespace strata::trainer {

bool rankSsdDirs(const std::string &artifactDir, const comm::Communicator &comm,
                 std::vector<std::string> &ssdDirs, std::string &error) {
  if (comm.size() <= 1)
    return true;
  artifact::Plan plan;
  if (!artifact::readPlan(artifactDir + "/plan.bin", plan, error))
    return false;
  if (plan.ssdBytes == 0)
    return true;
  std::vector<std::string> dirs = ssdDirs.empty() ? plan.ssdDirs : ssdDirs;
  for (std::string &d : dirs) {
    d += "/rank-" + std::to_string(comm.rank());
    if (!makeDirectories(d, error))
      return false;
  }
  ssdDirs = dirs;
  return true;
}

} // namespace strata::trainer
