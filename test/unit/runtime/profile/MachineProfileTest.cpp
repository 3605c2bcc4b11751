// MachineProfileTest.cpp - Machine profiles: round trip and bad files.

#include "runtime/profile/MachineProfile.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <unistd.h>

using namespace strata;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(getpid());
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path) << text;
}

TEST(MachineProfileTest, RoundTripsEveryField) {
  MachineProfile p;
  p.matmulLargeGflops = 1234.5;
  p.ssdReadLatencyUs = 17;
  p.copyGBs = 0.25;
  std::string path = tempPath("profile-roundtrip"), error;
  ASSERT_TRUE(p.write(path, error)) << error;
  MachineProfile q;
  ASSERT_TRUE(q.read(path, error)) << error;
  EXPECT_EQ(q.text(), p.text());
  EXPECT_DOUBLE_EQ(q.matmulLargeGflops, 1234.5);
  EXPECT_DOUBLE_EQ(q.ssdReadLatencyUs, 17);
  EXPECT_DOUBLE_EQ(q.copyGBs, 0.25);
  std::remove(path.c_str());
}

TEST(MachineProfileTest, MissingKeysKeepTheirDefaults) {
  std::string path = tempPath("profile-partial"), error;
  writeText(path, "# comment\n\ncopy_gbs 2.5\n");
  MachineProfile defaults, q;
  ASSERT_TRUE(q.read(path, error)) << error;
  EXPECT_DOUBLE_EQ(q.copyGBs, 2.5);
  EXPECT_DOUBLE_EQ(q.matmulSmallGflops, defaults.matmulSmallGflops);
  std::remove(path.c_str());
}

TEST(MachineProfileTest, SlowdownsMayBeZeroRatesMayNot) {
  std::string path = tempPath("profile-zero"), error;
  MachineProfile q;
  writeText(path, "overlap_slowdown 0\nssd_duplex_read_slowdown 0\n"
                  "ssd_duplex_write_slowdown 0\nqueue_round_trip_us 0\n");
  ASSERT_TRUE(q.read(path, error)) << error;
  EXPECT_DOUBLE_EQ(q.overlapSlowdown, 0);
  EXPECT_DOUBLE_EQ(q.ssdDuplexReadSlowdown, 0);
  EXPECT_DOUBLE_EQ(q.ssdDuplexWriteSlowdown, 0);
  EXPECT_DOUBLE_EQ(q.queueRoundTripUs, 0);
  writeText(path, "copy_gbs 0\n");
  EXPECT_FALSE(q.read(path, error));
  std::remove(path.c_str());
}

TEST(MachineProfileTest, BadFilesNameTheFileAndLine) {
  std::string path = tempPath("profile-bad"), error;
  MachineProfile q;
  writeText(path, "copy_gbs 2\nwarp_speed 9\n");
  EXPECT_FALSE(q.read(path, error));
  EXPECT_NE(error.find(path + ":2: unknown key 'warp_speed'"),
            std::string::npos)
      << error;
  writeText(path, "copy_gbs -1\n");
  EXPECT_FALSE(q.read(path, error));
  EXPECT_NE(error.find(path + ":1:"), std::string::npos) << error;
  writeText(path, "copy_gbs fast\n");
  EXPECT_FALSE(q.read(path, error));
  std::remove(path.c_str());
  EXPECT_FALSE(q.read(path, error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
}

} // namespace
