// Json.h - A small JSON reader for the files Strata's own tools write.
//
// strata-inspect --html reads a Chrome trace (strata-run --trace) and a
// training log (strata-run --log-json, one object per line). Both may come
// from anywhere, so the reader takes hostile text: it follows RFC 8259,
// refuses what is not JSON with the byte offset of the first bad byte,
// bounds the nesting depth, and never reads past the text.

#ifndef STRATA_RUNTIME_SUPPORT_JSON_H
#define STRATA_RUNTIME_SUPPORT_JSON_H

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace strata::json {

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> items;
  std::vector<std::pair<std::string, Value>> members;

  bool isNull() const { return kind == Kind::Null; }
  bool isNumber() const { return kind == Kind::Number; }
  bool isString() const { return kind == Kind::String; }
  bool isArray() const { return kind == Kind::Array; }
  bool isObject() const { return kind == Kind::Object; }
  /// The member `key` of an object (the first, if repeated); null if this
  /// is no object or has no such member.
  const Value *get(const std::string &key) const;
  /// The member `key` as a number; `fallback` when absent or not a number.
  double numberOr(const std::string &key, double fallback) const;
  /// The member `key` as a string; empty when absent or not a string.
  std::string stringOr(const std::string &key) const;
};

/// The deepest nesting of arrays and objects parse accepts.
constexpr int kMaxDepth = 64;

/// Parses `text`, which must hold exactly one JSON value (surrounding
/// whitespace allowed). False with `error` ("at byte N: ...") otherwise.
bool parse(const std::string &text, Value &out, std::string &error);

/// `text` as a JSON string literal, quotes included: `"` and `\` escaped,
/// control characters as \u00XX; other bytes (UTF-8) as they are.
std::string quote(const std::string &text);

} // namespace strata::json

#endif // STRATA_RUNTIME_SUPPORT_JSON_H
