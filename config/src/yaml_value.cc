#include "yaml_value.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>
#include <algorithm>

#include <cmath>
#include <regex>

#include "acc/common/error.h"

namespace acc::config::detail {
namespace {

// PyYAML's implicit resolvers (yaml/resolver.py), which follow YAML 1.1. Built on first use, not
// at start-up: compiling them costs every acc-launch run milliseconds, and most read no YAML.
struct Resolvers {
  std::regex boolean{"yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"};
  std::regex null{"~|null|Null|NULL|"};
  std::regex integer{
      "[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|"
      "[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+"};
  std::regex floating{
      "[-+]?(?:[0-9][0-9_]*)\\.[0-9_]*(?:[eE][-+][0-9]+)?|\\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|"
      "[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\\.[0-9_]*|[-+]?\\.(?:inf|Inf|INF)|\\.(?:nan|NaN|NAN)"};
  std::regex json_number{"-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"};
};

const Resolvers& resolvers() {
  static const Resolvers instance;
  return instance;
}

std::string without_underscores(const std::string& text) {
  std::string out;
  for (char c : text)
    if (c != '_') out += c;
  return out;
}

long long parse_int(const std::string& raw) {
  std::string text = without_underscores(raw);
  int sign = 1;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    if (text[0] == '-') sign = -1;
    text.erase(0, 1);
  }
  if (text.find(':') != std::string::npos) {  // base 60, as YAML 1.1 reads 1:30
    long long value = 0;
    size_t start = 0;
    while (start <= text.size()) {
      const size_t colon = text.find(':', start);
      value = value * 60 + std::stoll(text.substr(start, colon - start));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    return sign * value;
  }
  if (text.rfind("0b", 0) == 0) return sign * std::stoll(text.substr(2), nullptr, 2);
  if (text.rfind("0x", 0) == 0) return sign * std::stoll(text.substr(2), nullptr, 16);
  if (text.size() > 1 && text[0] == '0') return sign * std::stoll(text, nullptr, 8);
  return sign * std::stoll(text);
}

double parse_float(const std::string& raw) {
  const std::string text = without_underscores(raw);
  if (text.find("inf") != std::string::npos || text.find("Inf") != std::string::npos ||
      text.find("INF") != std::string::npos)
    return text[0] == '-' ? -HUGE_VAL : HUGE_VAL;
  if (text.find("nan") != std::string::npos || text.find("NaN") != std::string::npos ||
      text.find("NAN") != std::string::npos)
    return std::nan("");
  return std::stod(text);
}

// yaml-cpp keeps an alias as a reference to its anchor, so a file of a few lines that nests
// aliases ("billion laughs") names billions of values: converting them would never end. A launch
// config has tens of values; past this budget the file is refused.
constexpr size_t kMaxValues = 100000;

Value convert(const YAML::Node& node, bool json_numbers, const std::string& path,
              std::vector<std::string>& warnings, size_t& budget) {
  Value value;
  const YAML::Mark mark = node.Mark();
  if (budget == 0)
    throw ConfigError(path + ":" + std::to_string(mark.line + 1) + ":" +
                      std::to_string(mark.column + 1) + ": more than " +
                      std::to_string(kMaxValues) +
                      " values once its aliases (*name) are expanded; write the values out");
  --budget;
  (void)path;
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      value = Value::null();
      break;
    case YAML::NodeType::Scalar:
      if (node.Tag() == "?") {
        value = resolve_plain_scalar(node.Scalar(), json_numbers);
      } else {
        value = Value::of_string(node.Scalar());
        value.quoted = true;
      }
      break;
    case YAML::NodeType::Sequence:
      value.kind = Value::Kind::kList;
      for (const YAML::Node& item : node)
        value.items.push_back(convert(item, json_numbers, path, warnings, budget));
      break;
    case YAML::NodeType::Map:
      value = Value::map();
      for (const auto& entry : node) {
        const std::string key = entry.first.Scalar();
        Value item = convert(entry.second, json_numbers, path, warnings, budget);
        item.key_mark = {entry.first.Mark().line + 1, entry.first.Mark().column + 1};
        if (item.mark.line == 0) item.mark = item.key_mark;
        if (value.find(key)) {
          warnings.push_back(path + ":" + std::to_string(entry.first.Mark().line + 1) + ":" +
                             std::to_string(entry.first.Mark().column + 1) + ": " + key +
                             ": duplicate key; the last value is used (as PyYAML does); remove "
                             "the other");
        }
        value.set(key, std::move(item));
      }
      break;
  }
  if (!mark.is_null() && value.mark.line == 0) value.mark = {mark.line + 1, mark.column + 1};
  return value;
}

}  // namespace

Value resolve_plain_scalar(const std::string& text, bool json_numbers) {
  const Resolvers& r = resolvers();
  if (std::regex_match(text, r.null)) return Value::null();
  if (std::regex_match(text, r.boolean)) {
    Value v = Value::of_bool(text[0] == 'y' || text[0] == 'Y' || text[0] == 't' || text[0] == 'T' ||
                             text == "on" || text == "On" || text == "ON");
    v.text = text;
    return v;
  }
  try {
    if (json_numbers && std::regex_match(text, r.json_number)) {
      if (text.find_first_of(".eE") == std::string::npos) return Value::of_int(std::stoll(text));
      return Value::of_float(std::stod(text));
    }
    if (std::regex_match(text, r.integer)) {
      Value v = Value::of_int(parse_int(text));
      v.text = text;
      return v;
    }
    if (std::regex_match(text, r.floating)) {
      Value v = Value::of_float(parse_float(text));
      return v;
    }
  } catch (const std::exception&) {
    // Out of range for 64 bits: keep the text; the schema check reports it.
  }
  return Value::of_string(text);
}

bool needs_quotes(const std::string& text) {
  if (text.empty()) return true;
  const Value resolved = resolve_plain_scalar(text, false);
  if (resolved.kind != Value::Kind::kString) return true;
  // Resolved by PyYAML but not by our reader (no config key takes them): a date or a time, the
  // merge key and the value key. Built here, as only writing a config needs it.
  static const std::regex unread{
      "[0-9]{4}-[0-9]{2}-[0-9]{2}|"
      "[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \\t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\\.[0-9]*)?"
      "(?:[ \\t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?|<<|="};
  if (std::regex_match(text, unread)) return true;
  if (text.front() == ' ' || text.back() == ' ') return true;
  static const std::string kIndicators = "-?:,[]{}#&*!|>'\"%@`";
  if (kIndicators.find(text.front()) != std::string::npos) return true;
  const auto control = [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; };
  return text.find(": ") != std::string::npos || text.find(" #") != std::string::npos ||
         text.back() == ':' || std::any_of(text.begin(), text.end(), control);
}

Value parse_yaml(const std::string& text, const std::string& path, bool json_numbers,
                 std::vector<std::string>& warnings) {
  YAML::Node document;
  try {
    document = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's guard against a stack overflow; its own message is "bad file".
    throw ConfigError(
        path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
        ": nested too deep (the YAML reader stops at depth " + std::to_string(e.depth()) +
        "); a config file is a mapping of keys with a few sections");
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                      std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg +
                      "; fix the file or write it again with `acc-launch config`");
  }
  size_t budget = kMaxValues;
  return convert(document, json_numbers, path, warnings, budget);
}

}  // namespace acc::config::detail
