#include "acc/config/value.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace acc::config {

Value::Value() = default;
Value::Value(const Value&) = default;
Value::Value(Value&&) noexcept = default;
Value& Value::operator=(const Value&) = default;
Value& Value::operator=(Value&&) noexcept = default;
Value::~Value() = default;

Value Value::of_bool(bool b) {
  Value v;
  v.kind = Kind::kBool;
  v.boolean = b;
  v.text = b ? "true" : "false";
  return v;
}

Value Value::of_int(long long i) {
  Value v;
  v.kind = Kind::kInt;
  v.integer = i;
  v.text = std::to_string(i);
  return v;
}

Value Value::of_float(double d) {
  Value v;
  v.kind = Kind::kFloat;
  v.real = d;
  v.text = python_float_repr(d);
  return v;
}

Value Value::of_string(std::string s) {
  Value v;
  v.kind = Kind::kString;
  v.text = std::move(s);
  return v;
}

Value Value::map() {
  Value v;
  v.kind = Kind::kMap;
  return v;
}

const Value* Value::find(const std::string& key) const {
  if (kind != Kind::kMap) return nullptr;
  for (const auto& [name, value] : entries)
    if (name == key) return &value;
  return nullptr;
}

Value* Value::find(const std::string& key) {
  return const_cast<Value*>(static_cast<const Value*>(this)->find(key));
}

void Value::set(const std::string& key, Value value) {
  if (kind != Kind::kMap) *this = map();
  if (Value* existing = find(key)) {
    *existing = std::move(value);
    return;
  }
  entries.emplace_back(key, std::move(value));
}

void Value::erase(const std::string& key) {
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->first == key) {
      entries.erase(it);
      return;
    }
  }
}

namespace {

std::string python_repr(const Value& v) {
  if (v.kind == Value::Kind::kString) return "'" + v.text + "'";
  return v.python_str();
}

}  // namespace

std::string Value::python_str() const {
  switch (kind) {
    case Kind::kNull:
      return "None";
    case Kind::kBool:
      return boolean ? "True" : "False";
    case Kind::kInt:
      return std::to_string(integer);
    case Kind::kFloat:
      return python_float_repr(real);
    case Kind::kString:
      return text;
    case Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + python_repr(items[i]);
      return out + "]";
    }
    case Kind::kMap: {
      std::string out = "{";
      for (size_t i = 0; i < entries.size(); ++i)
        out += (i ? ", '" : "'") + entries[i].first + "': " + python_repr(entries[i].second);
      return out + "}";
    }
  }
  return "";
}

std::string Value::kind_name() const {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "a boolean";
    case Kind::kInt:
      return "an integer";
    case Kind::kFloat:
      return "a number";
    case Kind::kString:
      return "a string";
    case Kind::kList:
      return "a list";
    case Kind::kMap:
      return "a mapping";
  }
  return "";
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form, then laid out as Python's repr does: fixed
  // notation for decimal exponents in [-4, 16), scientific outside.
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string sci(buffer, result.ptr);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::atoi(sci.c_str() + e + 1);
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  if (exponent < -4 || exponent >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (exponent < 0) return sign + "0." + std::string(-exponent - 1, '0') + digits;
  const size_t int_digits = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_digits)
    return sign + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return sign + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

}  // namespace acc::config
