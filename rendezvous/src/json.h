#pragma once

// Just enough JSON for etcd's HTTP gateway: a reader into a small tree and a string quoter for
// the requests we write by hand. Numbers stay as their text (etcd writes int64 fields as strings
// anyway, and we never do arithmetic on a JSON number).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace acc::rendezvous::json {

struct Value {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  std::string text;  // a string's contents (unescaped), or a number as written
  std::vector<Value> items;
  std::vector<std::pair<std::string, Value>> members;

  // The member named `name` of an object; nullptr when absent or this is not an object.
  const Value* find(std::string_view name) const;
  // The member's string (or number text); `fallback` when absent.
  std::string text_of(std::string_view name, std::string fallback = "") const;
};

// Throws StoreError (naming the offset) when `text` is not one JSON value.
Value parse(std::string_view text);

// `text` as a JSON string literal, quotes included.
std::string quote(std::string_view text);

}  // namespace acc::rendezvous::json
