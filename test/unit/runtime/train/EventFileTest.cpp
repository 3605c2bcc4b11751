// EventFileTest.cpp - TFRecord framing and Event encoding of the
// TensorBoard writer, decoded by hand here (test/python/test_tensorboard.py
// reads the files with TensorBoard's own reader).

#include "runtime/train/EventFile.h"

#include "runtime/support/Crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace strata;
using namespace strata::trainer;

namespace {

uint64_t readVarint(const std::string &s, size_t &pos) {
  uint64_t v = 0;
  for (int shift = 0; pos < s.size(); shift += 7) {
    auto b = static_cast<unsigned char>(s[pos++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80))
      break;
  }
  return v;
}

TEST(EventFile, MaskedCrcIsTensorFlows) {
  // CRC-32C of "123456789" is 0xe3069283 (the standard check value);
  // TFRecord masks it: rotate right by 15, add 0xa282ead8.
  EXPECT_EQ(crc32c("123456789", 9), 0xe3069283u);
  uint32_t crc = 0xe3069283u;
  EXPECT_EQ(EventFile::maskedCrc("123456789"),
            ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(EventFile, RecordFramesTheBytesWithTheirChecksums) {
  std::string r = EventFile::record("abc");
  ASSERT_EQ(r.size(), 8u + 4 + 3 + 4);
  uint64_t length;
  std::memcpy(&length, r.data(), 8);
  EXPECT_EQ(length, 3u);
  uint32_t lengthCrc, dataCrc;
  std::memcpy(&lengthCrc, r.data() + 8, 4);
  std::memcpy(&dataCrc, r.data() + 15, 4);
  EXPECT_EQ(lengthCrc, EventFile::maskedCrc(r.substr(0, 8)));
  EXPECT_EQ(r.substr(12, 3), "abc");
  EXPECT_EQ(dataCrc, EventFile::maskedCrc("abc"));
}

TEST(EventFile, EventEncodesWallTimeStepAndScalars) {
  std::string e = EventFile::event(1.5, 300, "", {{"train/loss", 2.25}});
  size_t pos = 0;
  ASSERT_EQ(readVarint(e, pos), (1u << 3) | 1); // wall_time, fixed64
  double wall;
  std::memcpy(&wall, e.data() + pos, 8);
  pos += 8;
  EXPECT_EQ(wall, 1.5);
  ASSERT_EQ(readVarint(e, pos), (2u << 3) | 0); // step, varint
  EXPECT_EQ(readVarint(e, pos), 300u);
  ASSERT_EQ(readVarint(e, pos), (5u << 3) | 2); // summary
  size_t summaryEnd = readVarint(e, pos) + pos;
  EXPECT_EQ(summaryEnd, e.size());
  ASSERT_EQ(readVarint(e, pos), (1u << 3) | 2); // value
  readVarint(e, pos);
  ASSERT_EQ(readVarint(e, pos), (1u << 3) | 2); // tag
  uint64_t tagSize = readVarint(e, pos);
  EXPECT_EQ(e.substr(pos, tagSize), "train/loss");
  pos += tagSize;
  ASSERT_EQ(readVarint(e, pos), (2u << 3) | 5); // simple_value, fixed32
  float v;
  std::memcpy(&v, e.data() + pos, 4);
  EXPECT_EQ(v, 2.25f);
  EXPECT_EQ(pos + 4, e.size());
}

TEST(EventFile, FileStartsWithItsVersionAndRefusesABadDirectory) {
  std::string dir =
      ::testing::TempDir() + "/events." + std::to_string(::getpid());
  EventFile f;
  std::string error;
  ASSERT_TRUE(f.open(dir, error)) << error;
  ASSERT_TRUE(f.scalars(1, {{"a", 1.0}}, error)) << error;
  ASSERT_TRUE(f.close(error)) << error;
  EXPECT_NE(f.path().find("/events.out.tfevents."), std::string::npos);
  std::ifstream in(f.path(), std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  std::string bytes = s.str();
  uint64_t first;
  std::memcpy(&first, bytes.data(), 8);
  std::string data = bytes.substr(12, first);
  EXPECT_NE(data.find("brain.Event:2"), std::string::npos);
  EXPECT_EQ(bytes.size(),
            16 + first + 16 + EventFile::event(0, 1, "", {{"a", 1.0}}).size());
  EventFile bad;
  EXPECT_FALSE(bad.open(f.path() + "/below-a-file", error));
  EXPECT_NE(error.find(f.path()), std::string::npos) << error;
}

} // namespace
