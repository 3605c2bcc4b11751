// CheckedTest.cpp - Overflow-checked sizes and strict number parsing.

#include "runtime/support/Checked.h"
#include "runtime/support/Size.h"

#include <gtest/gtest.h>

using namespace strata;

TEST(Checked, ShapeProductsNeverWrap) {
  EXPECT_EQ(checkedNumElements({2, 3, 4}), 24);
  EXPECT_EQ(checkedNumElements({}), 1);
  EXPECT_EQ(checkedNumElements({0, int64_t(1) << 40, 4}), 0);
  // Empty, but its strides would overflow.
  EXPECT_FALSE(checkedNumElements({0, int64_t(1) << 62, 4}));
  EXPECT_FALSE(checkedNumElements({(int64_t(1) << 62) + 2, 4}));
  EXPECT_FALSE(checkedNumElements({-1, 4}));
  EXPECT_FALSE(checkedByteSize({int64_t(1) << 61, 8}, 4));
  EXPECT_EQ(checkedByteSize({3, 5}, 8), 120u);
}

TEST(Checked, ParsesWholeNumbersOnly) {
  int64_t v = 0;
  EXPECT_TRUE(parseInt64("9223372036854775807", v));
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_TRUE(parseInt64("-9223372036854775808", v));
  EXPECT_EQ(v, INT64_MIN);
  EXPECT_FALSE(parseInt64("9223372036854775808", v));
  EXPECT_FALSE(parseInt64("123456789012345678901", v));
  EXPECT_FALSE(parseInt64("12abc", v));
  EXPECT_FALSE(parseInt64("", v));
  EXPECT_FALSE(parseInt64("-", v));
  EXPECT_FALSE(parseInt64(" 1", v));
  EXPECT_FALSE(parseInt64("-3", v, 0));
  double d = 0;
  EXPECT_TRUE(parseFiniteDouble("1e-3", d));
  EXPECT_FALSE(parseFiniteDouble("nan", d));
  EXPECT_FALSE(parseFiniteDouble("1e999", d));
  EXPECT_FALSE(parseFiniteDouble("1.5.3", d));
}

TEST(Checked, SizesAreParsedWhole) {
  uint64_t bytes = 0;
  EXPECT_TRUE(parseSize("1.5GiB", bytes));
  EXPECT_EQ(bytes, uint64_t(3) << 29);
  EXPECT_FALSE(parseSize("1.5.3GiB", bytes));
  EXPECT_FALSE(parseSize("99999999999999999999TiB", bytes));
  // Past int64 (2^63 bytes is 8388608 TiB): refused, not wrapped.
  EXPECT_FALSE(parseSize("10000000TiB", bytes));
  EXPECT_FALSE(parseSize("8388608TiB", bytes));
  EXPECT_TRUE(parseSize("8388607TiB", bytes));
  EXPECT_EQ(bytes, uint64_t(8388607) << 40);
  EXPECT_FALSE(parseSize("", bytes));
  EXPECT_FALSE(parseSize("GiB", bytes));
}
