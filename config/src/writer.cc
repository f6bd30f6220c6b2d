// Writing a config back, as `accelerate config` does (config_args.py to_dict/to_yaml_file/
// to_json_file): sorted keys, null values and empty sections left out.

#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "acc/common/error.h"
#include "acc/common/strings.h"
#include "acc/config/cluster_config.h"
#include "yaml_value.h"

namespace acc::config {
namespace {

// to_dict(): drops None values and turns empty dicts into None (so drops them too).
std::vector<std::pair<std::string, Value>> written_entries(const Value& map) {
  std::vector<std::pair<std::string, Value>> out;
  for (const auto& [key, value] : map.entries) {
    if (value.is_null()) continue;
    if (value.is_map() && value.entries.empty()) continue;
    out.emplace_back(key, value);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

bool is_control(char c) {
  return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
}

// A string as YAML text (a key or a value): plain where it reads back as the same string,
// single-quoted where it needs quotes, double-quoted with escapes where it holds a control
// character (a newline or NUL would not survive single quotes), as PyYAML's safe_dump writes it.
std::string yaml_text(const std::string& text) {
  if (!detail::needs_quotes(text)) return text;
  if (std::none_of(text.begin(), text.end(), is_control)) {
    std::string quoted = "'";
    for (char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    return quoted + "'";
  }
  static const char kHex[] = "0123456789ABCDEF";
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (is_control(c)) {
      const auto byte = static_cast<unsigned char>(c);
      quoted += "\\x";
      quoted += kHex[byte >> 4];
      quoted += kHex[byte & 15];
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

std::string yaml_scalar(const Value& value) {
  switch (value.kind) {
    case Value::Kind::kNull:
      return "null";
    case Value::Kind::kBool:
      return value.boolean ? "true" : "false";
    case Value::Kind::kInt:
      return std::to_string(value.integer);
    case Value::Kind::kFloat:
      return python_float_repr(value.real);
    default:
      return yaml_text(value.text);
  }
}

// A key as YAML text before its ':': YAML limits a key written inline to 1024 characters, so a
// longer one (a key of control characters, each written \xNN, grows fourfold) is an explicit
// key, "? KEY" on a line of its own (found by tests/fuzz/config_yaml_fuzz.cc).
std::string key_text(const std::string& key, const std::string& pad) {
  std::string text = yaml_text(key);
  return text.size() < 1024 ? text : "? " + text + "\n" + pad;
}

void write_yaml(const Value& map, int indent, std::string& out) {
  const std::string pad(indent, ' ');
  for (const auto& [raw_key, value] : written_entries(map)) {
    const std::string key = key_text(raw_key, pad);
    if (value.is_map()) {
      out += pad + key + ":\n";
      write_yaml(value, indent + 2, out);
    } else if (value.kind == Value::Kind::kList) {
      if (value.items.empty()) {
        out += pad + key + ": []\n";
        continue;
      }
      out += pad + key + ":\n";
      for (const Value& item : value.items) out += pad + "- " + yaml_scalar(item) + "\n";
    } else {
      out += pad + key + ": " + yaml_scalar(value) + "\n";
    }
  }
}

// json.dumps(to_dict(), indent=2, sort_keys=True): nlohmann's json keeps its keys sorted, and
// ensure_ascii escapes what is not ASCII as Python's default does.
nlohmann::json json_value(const Value& value) {
  switch (value.kind) {
    case Value::Kind::kMap: {
      nlohmann::json object = nlohmann::json::object();
      for (const auto& [key, entry] : written_entries(value)) object[key] = json_value(entry);
      return object;
    }
    case Value::Kind::kList: {
      nlohmann::json list = nlohmann::json::array();
      for (const Value& item : value.items) list.push_back(json_value(item));
      return list;
    }
    case Value::Kind::kString:
      return value.text;
    case Value::Kind::kBool:
      return value.boolean;
    case Value::Kind::kInt:
      return value.integer;
    case Value::Kind::kFloat:
      return value.real;
    case Value::Kind::kNull:
      break;
  }
  return nullptr;
}

void make_parents(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      throw ConfigError("cannot create the directory " + dir + ": " + std::strerror(errno));
  }
}

}  // namespace

std::string to_yaml(const ClusterConfig& config) {
  std::string out;
  write_yaml(config.root(), 0, out);
  return out;
}

std::string to_json(const ClusterConfig& config) {
  // A YAML file may hold bytes that are not UTF-8 (the YAML reader passes them through): each
  // becomes U+FFFD, as Python's errors="replace" would write it, instead of the type_error that
  // nlohmann::json throws for it by default (found by tests/fuzz/config_yaml_fuzz.cc).
  return json_value(config.root())
             .dump(2, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace) +
         "\n";
}

void save_config(const ClusterConfig& config, const std::string& path, bool create_parent) {
  if (create_parent) make_parents(path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  ACC_CHECK(out.good(), ConfigError, "cannot write the config file ", path, ": ",
            std::strerror(errno), "; check that its directory exists and is writable");
  out << (ends_with(path, ".json") ? to_json(config) : to_yaml(config));
  out.close();
  ACC_CHECK(out.good(), ConfigError, "cannot write the config file ", path, ": ",
            std::strerror(errno));
}

}  // namespace acc::config
