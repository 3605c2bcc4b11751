// Json.cpp - A small JSON reader (RFC 8259).

#include "runtime/support/Json.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace strata::json {

const Value *Value::get(const std::string &key) const {
  if (kind != Kind::Object)
    return nullptr;
  for (const auto &[name, value] : members)
    if (name == key)
      return &value;
  return nullptr;
}

double Value::numberOr(const std::string &key, double fallback) const {
  const Value *v = get(key);
  return v && v->isNumber() ? v->number : fallback;
}

std::string Value::stringOr(const std::string &key) const {
  const Value *v = get(key);
  return v && v->isString() ? v->string : std::string();
}

namespace {

class Parser {
public:
  explicit Parser(const std::string &text)
      : p_(text.data()), begin_(text.data()), end_(text.data() + text.size()) {}

  bool document(Value &out, std::string &error) {
    skipSpace();
    if (!value(out, 0)) {
      error = error_;
      return false;
    }
    skipSpace();
    if (p_ != end_) {
      fail("text after the value");
      error = error_;
      return false;
    }
    return true;
  }

private:
  bool fail(const char *why) {
    if (error_.empty())
      error_ = "at byte " + std::to_string(p_ - begin_) + ": " + why;
    return false;
  }

  void skipSpace() {
    while (p_ < end_ &&
           (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r'))
      ++p_;
  }

  bool literal(const char *word) {
    size_t n = std::strlen(word);
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0)
      return fail("not a JSON value");
    p_ += n;
    return true;
  }

  bool value(Value &out, int depth) {
    if (p_ == end_)
      return fail("the text ends where a value should be");
    switch (*p_) {
    case '{':
      return object(out, depth + 1);
    case '[':
      return array(out, depth + 1);
    case '"':
      out.kind = Value::Kind::String;
      return string(out.string);
    case 't':
      out.kind = Value::Kind::Bool;
      out.boolean = true;
      return literal("true");
    case 'f':
      out.kind = Value::Kind::Bool;
      out.boolean = false;
      return literal("false");
    case 'n':
      out.kind = Value::Kind::Null;
      return literal("null");
    default:
      out.kind = Value::Kind::Number;
      return number(out.number);
    }
  }

  bool object(Value &out, int depth) {
    if (depth > kMaxDepth)
      return fail("nested more than 64 deep");
    out.kind = Value::Kind::Object;
    ++p_;
    skipSpace();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    while (true) {
      skipSpace();
      if (p_ == end_ || *p_ != '"')
        return fail("expected a member name in quotes");
      std::string key;
      if (!string(key))
        return false;
      skipSpace();
      if (p_ == end_ || *p_ != ':')
        return fail("expected ':' after a member name");
      ++p_;
      skipSpace();
      out.members.emplace_back(std::move(key), Value());
      if (!value(out.members.back().second, depth))
        return false;
      skipSpace();
      if (p_ < end_ && *p_ == ',') {
        ++p_;
        continue;
      }
      if (p_ < end_ && *p_ == '}') {
        ++p_;
        return true;
      }
      return fail("expected ',' or '}' in an object");
    }
  }

  bool array(Value &out, int depth) {
    if (depth > kMaxDepth)
      return fail("nested more than 64 deep");
    out.kind = Value::Kind::Array;
    ++p_;
    skipSpace();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    while (true) {
      skipSpace();
      out.items.emplace_back();
      if (!value(out.items.back(), depth))
        return false;
      skipSpace();
      if (p_ < end_ && *p_ == ',') {
        ++p_;
        continue;
      }
      if (p_ < end_ && *p_ == ']') {
        ++p_;
        return true;
      }
      return fail("expected ',' or ']' in an array");
    }
  }

  bool hex4(unsigned &code) {
    if (end_ - p_ < 4)
      return fail("a \\u escape needs four hex digits");
    code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = *p_++;
      code <<= 4;
      if (c >= '0' && c <= '9')
        code |= c - '0';
      else if (c >= 'a' && c <= 'f')
        code |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        code |= c - 'A' + 10;
      else
        return fail("a \\u escape needs four hex digits");
    }
    return true;
  }

  static void appendUtf8(std::string &out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  bool string(std::string &out) {
    ++p_; // The opening quote.
    while (true) {
      if (p_ == end_)
        return fail("a string is not closed");
      char c = *p_;
      if (c == '"') {
        ++p_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20)
        return fail("a control character inside a string");
      if (c != '\\') {
        out += c;
        ++p_;
        continue;
      }
      ++p_;
      if (p_ == end_)
        return fail("a string ends in a backslash");
      char e = *p_++;
      switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        unsigned code = 0;
        if (!hex4(code))
          return false;
        // A surrogate pair is one code point; a lone half becomes U+FFFD.
        if (code >= 0xD800 && code < 0xDC00 && end_ - p_ >= 6 &&
            p_[0] == '\\' && p_[1] == 'u') {
          const char *save = p_;
          p_ += 2;
          unsigned low = 0;
          if (!hex4(low))
            return false;
          if (low >= 0xDC00 && low < 0xE000)
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          else
            p_ = save, code = 0xFFFD;
        } else if (code >= 0xD800 && code < 0xE000) {
          code = 0xFFFD;
        }
        appendUtf8(out, code);
        break;
      }
      default:
        --p_;
        return fail("an unknown escape in a string");
      }
    }
  }

  bool number(double &out) {
    const char *start = p_;
    auto digits = [&] {
      const char *from = p_;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9')
        ++p_;
      return p_ > from;
    };
    if (p_ < end_ && *p_ == '-')
      ++p_;
    if (p_ < end_ && *p_ == '0')
      ++p_;
    else if (!digits())
      return p_ = start, fail("not a JSON value");
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      if (!digits())
        return fail("a number needs digits after its point");
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-'))
        ++p_;
      if (!digits())
        return fail("a number needs digits in its exponent");
    }
    // The grammar is checked; strtod reads the same bytes (a copy, since
    // the text need not end there). Out-of-range values become +-inf or 0.
    std::string text(start, p_);
    out = std::strtod(text.c_str(), nullptr);
    return true;
  }

  const char *p_;
  const char *begin_;
  const char *end_;
  std::string error_;
};

} // namespace

bool parse(const std::string &text, Value &out, std::string &error) {
  out = Value();
  return Parser(text).document(out, error);
}

std::string quote(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", u);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

} // namespace strata::json
