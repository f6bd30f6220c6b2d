#include "json.h"

#include <cstdint>
#include <cstdio>

#include "acc/common/error.h"

namespace acc::rendezvous::json {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Value document() {
    Value value = parse_value(0);
    skip_space();
    if (at_ != text_.size()) fail("trailing characters");
    return value;
  }

 private:
  // Bounds the recursion: a reply nested deeper than any etcd reply is not etcd's.
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void fail(std::string_view what) const {
    throw StoreError(detail::concat("etcd sent malformed JSON: ", what, " at offset ", at_));
  }
  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\r' || text_[at_] == '\t'))
      ++at_;
  }
  char peek() {
    skip_space();
    if (at_ == text_.size()) fail("unexpected end");
    return text_[at_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++at_;
  }
  bool literal(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) fail("nested too deep");
    Value value;
    const char c = peek();
    if (c == '{') {
      value.kind = Value::Kind::kObject;
      ++at_;
      if (peek() == '}') return ++at_, value;
      for (;;) {
        if (peek() != '"') fail("expected a member name");
        std::string name = parse_string();
        expect(':');
        value.members.emplace_back(std::move(name), parse_value(depth + 1));
        if (peek() == '}') return ++at_, value;
        expect(',');
      }
    }
    if (c == '[') {
      value.kind = Value::Kind::kArray;
      ++at_;
      if (peek() == ']') return ++at_, value;
      for (;;) {
        value.items.push_back(parse_value(depth + 1));
        if (peek() == ']') return ++at_, value;
        expect(',');
      }
    }
    if (c == '"') {
      value.kind = Value::Kind::kString;
      value.text = parse_string();
    } else if (literal("true")) {
      value.kind = Value::Kind::kBool;
      value.boolean = true;
    } else if (literal("false")) {
      value.kind = Value::Kind::kBool;
    } else if (literal("null")) {
      value.kind = Value::Kind::kNull;
    } else {
      const size_t start = at_;
      while (at_ < text_.size() &&
             std::string_view("+-0123456789.eE").find(text_[at_]) != std::string_view::npos)
        ++at_;
      if (at_ == start) fail("expected a value");
      value.kind = Value::Kind::kNumber;
      value.text = std::string(text_.substr(start, at_ - start));
    }
    return value;
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    for (;;) {
      if (at_ == text_.size()) fail("unterminated string");
      const char c = text_[at_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ == text_.size()) fail("unterminated escape");
      const char e = text_[at_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
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
        case 'u':
          append_utf8(out, parse_code_point());
          break;
        default:
          fail("unknown escape");
      }
    }
  }

  std::uint32_t parse_hex4() {
    if (at_ + 4 > text_.size()) fail("short \\u escape");
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[at_++];
      const int digit = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
      if (digit < 0) fail("bad \\u escape");
      value = value << 4 | static_cast<std::uint32_t>(digit);
    }
    return value;
  }

  std::uint32_t parse_code_point() {
    std::uint32_t high = parse_hex4();
    if (high < 0xD800 || high > 0xDBFF) return high;
    // A UTF-16 surrogate pair: \uD8xx\uDCxx.
    if (!literal("\\u")) fail("lone surrogate");
    const std::uint32_t low = parse_hex4();
    if (low < 0xDC00 || low > 0xDFFF) fail("bad surrogate pair");
    return 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
  }

  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | cp >> 6);
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | cp >> 12);
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | cp >> 18);
      out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string_view text_;
  size_t at_ = 0;
};

}  // namespace

const Value* Value::find(std::string_view name) const {
  for (const auto& [key, value] : members)
    if (key == name) return &value;
  return nullptr;
}

std::string Value::text_of(std::string_view name, std::string fallback) const {
  const Value* member = find(name);
  return member ? member->text : fallback;
}

Value parse(std::string_view text) {
  return Parser(text).document();
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace acc::rendezvous::json
