// Writing a config back, as `accelerate config` does (config_args.py to_dict/to_yaml_file/
// to_json_file): sorted keys, null values and empty sections left out. YAML through yaml-cpp's
// emitter, which knows YAML's quoting and escaping rules; JSON through nlohmann's json.

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
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

// yaml-cpp's emitter quotes what YAML's grammar needs quoted (a colon and a space, a leading `*`,
// an empty string), not what PyYAML's YAML 1.1 resolution would read as another type: plain `no`
// is false and `1` an integer to Accelerate. So the style is chosen here, as PyYAML's safe_dump
// chooses it: plain where it reads back as the same string, single quotes where it needs quotes,
// double quotes with escapes where it holds a control character (a newline or a NUL would not
// survive single quotes). Plain still leaves the emitter free to quote what YAML itself needs.
void write_string(YAML::Emitter& out, const std::string& text) {
  if (!detail::needs_quotes(text)) {
    out << text;
  } else if (std::none_of(text.begin(), text.end(), is_control)) {
    out << YAML::SingleQuoted << text;
  } else {
    // The emitter writes DEL as it is inside double quotes, where YAML allows only printable
    // characters; escaping what is not ASCII writes it \x7f (and the rest as the code points
    // they are, which read back the same).
    out << YAML::EscapeNonAscii << YAML::DoubleQuoted << text << YAML::EmitNonAscii;
  }
}

// PyYAML's represent_float: a float that YAML 1.1 reads back as one, with a dot before any
// exponent (1.0e-05) and .inf and .nan, where Python's repr (1e-05, inf) reads back as a string.
std::string yaml_float(double value) {
  if (std::isnan(value)) return ".nan";
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  std::string text = python_float_repr(value);
  const size_t e = text.find('e');
  if (e != std::string::npos && text.find('.') == std::string::npos) text.insert(e, ".0");
  return text;
}

// A key YAML allows inline is shorter than 1024 characters as written; a longer one (a key of
// control characters, each written \xNN, grows fourfold) is an explicit key, "? KEY" on a line
// of its own (found by tests/fuzz/config_yaml_fuzz.cc). The emitter makes one so by itself only
// past 1024 bytes before escaping.
bool is_long_key(const std::string& key) {
  YAML::Emitter probe;
  write_string(probe, key);
  return probe.size() >= 1024;
}

void write_value(YAML::Emitter& out, const Value& value);

void write_map(YAML::Emitter& out, const Value& map) {
  out << YAML::BeginMap;
  for (const auto& [key, value] : written_entries(map)) {
    if (is_long_key(key)) out << YAML::LongKey;
    out << YAML::Key;
    write_string(out, key);
    out << YAML::Value;
    write_value(out, value);
  }
  out << YAML::EndMap;
}

void write_list(YAML::Emitter& out, const Value& list) {
  // `tpu_env: []` on the key's line, as PyYAML writes an empty list (block style puts the [] on
  // a line of its own).
  if (list.items.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const Value& item : list.items) write_value(out, item);
  out << YAML::EndSeq;
}

void write_value(YAML::Emitter& out, const Value& value) {
  switch (value.kind) {
    case Value::Kind::kMap:
      return write_map(out, value);
    case Value::Kind::kList:
      return write_list(out, value);
    case Value::Kind::kNull:
      out << YAML::Null;
      return;
    case Value::Kind::kBool:
      out << value.boolean;
      return;
    case Value::Kind::kInt:
      out << value.integer;
      return;
    case Value::Kind::kFloat:
      out << yaml_float(value.real);
      return;
    case Value::Kind::kString:
      return write_string(out, value.text);
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
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);  // `null`, as PyYAML writes it (the emitter's own is ~)
  write_map(out, config.root());
  // The styles chosen fit every string (single quotes never get a line break) and every group is
  // closed: the emitter has nothing to refuse.
  ACC_ASSERT(out.good());
  return std::string(out.c_str(), out.size()) + "\n";
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
