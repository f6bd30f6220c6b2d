#pragma once

// A YAML/JSON value as PyYAML would load it (YAML 1.1 scalar resolution), with the position it
// came from. Plain data, safe to copy; no I/O.

#include <string>
#include <utility>
#include <vector>

namespace acc::config {

// A position in a config file, 1-based; line 0 means "not from a file" (a default or a wizard
// answer).
struct Mark {
  int line = 0;
  int column = 0;
};

struct Value {
  enum class Kind { kNull, kBool, kInt, kFloat, kString, kList, kMap };

  Kind kind = Kind::kNull;
  bool boolean = false;
  long long integer = 0;
  double real = 0;
  std::string text;  // kString; for kInt/kFloat/kBool the scalar as written
  std::vector<Value> items;
  std::vector<std::pair<std::string, Value>> entries;  // kMap, in file order
  Mark mark;                                           // where the value was written
  Mark key_mark;        // where its key was written (entries of a map)
  bool quoted = false;  // a quoted scalar: never a bool, number or null

  // Declared here and defaulted in value.cc: clang (with libstdc++) cannot check Value's implicit
  // members inside the class, where the std::pair of `entries` is still incomplete; GCC can.
  Value();
  Value(const Value&);
  Value(Value&&) noexcept;
  Value& operator=(const Value&);
  Value& operator=(Value&&) noexcept;
  ~Value();

  static Value null() { return Value{}; }
  static Value of_bool(bool b);
  static Value of_int(long long i);
  static Value of_float(double d);
  static Value of_string(std::string s);
  static Value map();

  bool is_null() const { return kind == Kind::kNull; }
  bool is_map() const { return kind == Kind::kMap; }
  // A map with no entries, or null (Accelerate treats both as "not set").
  bool is_empty_map() const { return is_null() || (is_map() && entries.empty()); }

  // The entry named `key` in a map, or nullptr.
  const Value* find(const std::string& key) const;
  Value* find(const std::string& key);
  // Sets (replacing in place, or appending) the entry `key` of a map.
  void set(const std::string& key, Value value);
  void erase(const std::string& key);

  // What Python's str() gives for the value PyYAML loaded: True/False, None, 1.0, 100000000,
  // ['a', 'b']. Accelerate builds its worker environment with str(), so this is what a worker
  // sees.
  std::string python_str() const;
  // The name of the kind as a user reads it: "a boolean", "an integer", ...
  std::string kind_name() const;
};

// Python's repr() of a float: shortest round-trip digits, "1.0", "1e-05", "1e+16".
std::string python_float_repr(double value);

}  // namespace acc::config
