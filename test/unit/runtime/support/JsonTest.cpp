// JsonTest.cpp - The JSON reader on good and hostile text.

#include "runtime/support/Json.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace strata;

namespace {

json::Value parseOk(const std::string &text) {
  json::Value v;
  std::string error;
  EXPECT_TRUE(json::parse(text, v, error)) << text << ": " << error;
  return v;
}

std::string parseError(const std::string &text) {
  json::Value v;
  std::string error;
  EXPECT_FALSE(json::parse(text, v, error)) << text;
  return error;
}

TEST(Json, ReadsEveryKindOfValue) {
  json::Value v = parseOk(
      " {\"a\": [1, -2.5e2, 0, true, false, null], \"b\": {\"c\": \"d\"},"
      " \"e\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\"} ");
  ASSERT_TRUE(v.isObject());
  const json::Value *a = v.get("a");
  ASSERT_TRUE(a && a->isArray());
  ASSERT_EQ(a->items.size(), 6u);
  EXPECT_EQ(a->items[0].number, 1);
  EXPECT_EQ(a->items[1].number, -250);
  EXPECT_EQ(a->items[2].number, 0);
  EXPECT_TRUE(a->items[3].boolean);
  EXPECT_FALSE(a->items[4].boolean);
  EXPECT_TRUE(a->items[5].isNull());
  EXPECT_EQ(v.get("b")->stringOr("c"), "d");
  EXPECT_EQ(v.stringOr("e"), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(v.numberOr("missing", 7), 7);
  EXPECT_EQ(v.numberOr("b", 7), 7); // Not a number.
}

TEST(Json, DecodesUnicodeEscapesToUtf8) {
  // U+00E9, U+20AC and U+1F600 (a surrogate pair); a lone half is U+FFFD.
  json::Value v = parseOk("\"\\u00e9\\u20AC\\ud83d\\ude00\\ud800x\"");
  EXPECT_EQ(v.string, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xEF\xBF\xBDx");
}

TEST(Json, HugeNumbersBecomeInfinityNotUndefinedBehaviour) {
  json::Value v = parseOk("[1e999, -1e999, 1e-999]");
  EXPECT_TRUE(std::isinf(v.items[0].number));
  EXPECT_TRUE(std::isinf(v.items[1].number));
  EXPECT_EQ(v.items[2].number, 0);
}

TEST(Json, RefusesWhatIsNotJsonNamingTheByte) {
  EXPECT_NE(parseError("").find("ends where a value should be"),
            std::string::npos);
  EXPECT_NE(parseError("[1, 2,]").find("at byte 6"), std::string::npos);
  EXPECT_NE(parseError("{\"a\" 1}").find("':'"), std::string::npos);
  EXPECT_NE(parseError("\"open").find("not closed"), std::string::npos);
  EXPECT_NE(parseError("\"a\nb\"").find("control character"),
            std::string::npos);
  EXPECT_NE(parseError("\"\\x\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(parseError("\"\\u12\"").find("four hex digits"), std::string::npos);
  EXPECT_NE(parseError("01").find("text after the value"), std::string::npos);
  EXPECT_NE(parseError("1.").find("digits after its point"), std::string::npos);
  EXPECT_NE(parseError("1e+").find("exponent"), std::string::npos);
  EXPECT_NE(parseError("NaN").find("not a JSON value"), std::string::npos);
  EXPECT_NE(parseError("tru").find("not a JSON value"), std::string::npos);
  EXPECT_NE(parseError("{} {}").find("text after the value"),
            std::string::npos);
}

TEST(Json, BoundsTheNestingDepth) {
  std::string deep(64, '[');
  deep += std::string(64, ']');
  parseOk(deep);
  std::string deeper(100000, '[');
  EXPECT_NE(parseError(deeper).find("nested more than 64 deep"),
            std::string::npos);
}

} // namespace
