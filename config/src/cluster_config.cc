#include "acc/config/cluster_config.h"
#include "acc/common/strings.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "acc/common/error.h"
#include "acc/config/schema.h"
#include "nlohmann/json.hpp"
#include "yaml_value.h"

namespace acc::config {
namespace {

// Accelerate's str_to_bool spellings, for booleans written as strings ('no', "true").
std::optional<bool> truth_value(const std::string& text) {
  const std::string t = to_lower(text);
  if (t == "y" || t == "yes" || t == "t" || t == "true" || t == "on" || t == "1") return true;
  if (t == "n" || t == "no" || t == "f" || t == "false" || t == "off" || t == "0") return false;
  return std::nullopt;
}

// Collects problems (fatal, one line each) and warnings while a document is checked.
class Checker {
 public:
  Checker(std::string path, std::vector<std::string>& warnings)
      : path_(std::move(path)), warnings_(warnings) {}

  std::string where(Mark mark) const {
    if (mark.line == 0) mark = {1, 1};
    return path_ + ":" + std::to_string(mark.line) + ":" + std::to_string(mark.column) + ": ";
  }
  void problem(Mark mark, const std::string& key, const std::string& text) {
    problems_.push_back(where(mark) + key + ": " + text);
  }
  void warning(Mark mark, const std::string& key, const std::string& text) {
    warnings_.push_back(where(mark) + key + ": " + text);
  }
  [[noreturn]] void refuse(Mark mark, const std::string& key, const std::string& text) {
    throw ConfigError(where(mark) + key + ": " + text);
  }
  void throw_if_any() const {
    if (problems_.empty()) return;
    std::string message;
    for (size_t i = 0; i < problems_.size(); ++i) message += (i ? "\n" : "") + problems_[i];
    throw ConfigError(message);
  }

  // Checks `value` against `spec` and brings it to the type's canonical form. `key` is the name
  // shown to the user (section.key for nested keys).
  // Returns false after reporting a problem.
  bool check_type(const KeySpec& spec, const std::string& key, Value& value) {
    const size_t before = problems_.size();
    check_type_impl(spec, key, value);
    return problems_.size() == before;
  }

  void check_type_impl(const KeySpec& spec, const std::string& key, Value& value) {
    if (value.is_null()) return;
    const Mark mark = value.mark;
    switch (spec.type) {
      case KeyType::kBool:
        if (value.kind == Value::Kind::kBool) return;
        if (value.kind == Value::Kind::kString || value.kind == Value::Kind::kInt) {
          if (auto b = truth_value(value.text)) {
            const Mark m = value.mark, km = value.key_mark;
            value = Value::of_bool(*b);
            value.mark = m;
            value.key_mark = km;
            return;
          }
        }
        problem(mark, key,
                "expected true or false, got " + describe(value) + "; write " +
                    std::string(spec.name) + ": true or " + std::string(spec.name) + ": false");
        return;
      case KeyType::kInt:
        if (value.kind == Value::Kind::kInt) return;
        problem(mark, key,
                "expected an integer, got " + describe(value) +
                    (value.quoted ? "; write the number without quotes"
                                  : "; write a whole "
                                    "number such as 2"));
        return;
      case KeyType::kNumber:
        if (value.kind == Value::Kind::kInt || value.kind == Value::Kind::kFloat) return;
        problem(mark, key,
                "expected a number, got " + describe(value) + "; write a number such as 1.0");
        return;
      case KeyType::kString:
        if (value.kind == Value::Kind::kString) return;
        if (value.kind == Value::Kind::kInt || value.kind == Value::Kind::kFloat) {
          // `gpu_ids: 0` or `main_process_ip: 1234`: PyYAML reads a number; the user meant text.
          const Mark m = value.mark, km = value.key_mark;
          value = Value::of_string(value.text);
          value.mark = m;
          value.key_mark = km;
          return;
        }
        problem(mark, key, "expected a string, got " + describe(value) + "; quote the value");
        return;
      case KeyType::kStringList:
        if (value.kind == Value::Kind::kList) return;
        problem(mark, key,
                "expected a list, got " + describe(value) + "; write [] or a list of strings");
        return;
      case KeyType::kDict:
        if (value.kind == Value::Kind::kMap) return;
        problem(mark, key,
                "expected a mapping of keys to values, got " + describe(value) + "; write " +
                    std::string(spec.name) + ": {} or indent its keys below it");
        return;
    }
  }

  // Checks a value against the spec's choices; enumerations match case-insensitively and are
  // stored with the spelling of the choice.
  void check_choice(const KeySpec& spec, const std::string& key, Value& value) {
    if (spec.choices.empty() || value.is_null()) return;
    const std::string text = value.kind == Value::Kind::kString ? value.text : value.python_str();
    for (std::string_view choice : spec.choices) {
      if (to_upper(text) == to_upper(std::string(choice))) {
        if (value.kind == Value::Kind::kString) value.text = std::string(choice);
        return;
      }
    }
    std::vector<std::string> candidates;
    for (std::string_view choice : spec.choices) candidates.emplace_back(choice);
    const std::string guess = nearest(to_upper(text), [&] {
      std::vector<std::string> up;
      for (auto& c : candidates) up.push_back(to_upper(c));
      return up;
    }());
    std::string suggestion;
    for (auto& c : candidates)
      if (to_upper(c) == guess && !guess.empty()) suggestion = " (did you mean " + c + "?)";
    problem(value.mark, key,
            "'" + text + "' is not one of " + join(spec.choices, ", ") + suggestion);
  }

  static std::string describe(const Value& value) {
    if (value.kind == Value::Kind::kString) return "'" + value.text + "'";
    if (value.kind == Value::Kind::kBool)
      return "'" + value.text + "' (YAML reads it as a boolean)";
    if (value.kind == Value::Kind::kList) return "a list";
    if (value.kind == Value::Kind::kMap) return "a mapping";
    return value.text;
  }

 private:
  std::string path_;
  std::vector<std::string>& warnings_;
  std::vector<std::string> problems_;
};

std::vector<std::string> key_names(const std::vector<KeySpec>& specs) {
  std::vector<std::string> names;
  for (const KeySpec& spec : specs) names.emplace_back(spec.name);
  return names;
}

void migrate_legacy_keys(Value& root, Checker& checker) {
  // process_config(): `fp16: true` becomes mixed_precision fp16; the key goes away.
  if (Value* fp16 = root.find("fp16")) {
    const bool on = fp16->kind == Value::Kind::kBool ? fp16->boolean : false;
    if (!root.find("mixed_precision") && on) {
      Value mp = Value::of_string("fp16");
      mp.mark = fp16->mark;
      mp.key_mark = fp16->key_mark;
      root.set("mixed_precision", mp);
    }
    root.erase("fp16");
  }
  // A top-level `dynamo_backend: X` becomes dynamo_config (NO: an empty one).
  if (Value* backend = root.find("dynamo_backend")) {
    Value legacy = *backend;
    root.erase("dynamo_backend");
    if (root.find("dynamo_config") && !root.find("dynamo_config")->is_empty_map()) {
      checker.warning(legacy.key_mark, "dynamo_backend",
                      "legacy key ignored because dynamo_config is present; remove it");
      return;
    }
    Value section = Value::map();
    section.key_mark = legacy.key_mark;
    section.mark = legacy.mark;
    const std::string name =
        legacy.kind == Value::Kind::kBool && !legacy.boolean ? "NO" : legacy.text;
    if (to_upper(name) != "NO") {
      legacy.kind = Value::Kind::kString;
      legacy.text = name;
      section.set("dynamo_backend", legacy);
    }
    root.set("dynamo_config", section);
  }
}

// `distributed_type: NO` and `mixed_precision: no` unquoted: PyYAML reads a boolean false, and
// Accelerate then fails far from the cause. The user meant the string.
void restore_meant_strings(Value& root) {
  for (const char* key : {"distributed_type", "mixed_precision"}) {
    Value* value = root.find(key);
    if (value && value->kind == Value::Kind::kBool && !value->boolean) {
      const Mark m = value->mark, km = value->key_mark;
      *value = Value::of_string(std::string(key) == "distributed_type" ? "NO" : "no");
      value->mark = m;
      value->key_mark = km;
    }
  }
}

void check_sections(Value& root, Checker& checker) {
  for (auto& [name, section] : root.entries) {
    if (section.kind != Value::Kind::kMap) continue;
    const std::vector<KeySpec>& specs = section_keys(name);
    if (specs.empty()) continue;
    for (auto& [key, value] : section.entries) {
      const KeySpec* spec = find_section_key(name, key);
      const std::string shown = name + "." + key;
      if (!spec) {
        const std::string guess = nearest(canonical_section_key(name, key), key_names(specs));
        checker.warning(
            value.key_mark, shown,
            "unknown key, ignored (Accelerate ignores it too)" +
                (guess.empty() ? std::string("; remove it") : "; did you mean " + guess + "?"));
        continue;
      }
      if (spec->name == "fp8_override_linear_precision" && value.kind == Value::Kind::kString) {
        continue;  // "(false, false, false)": read as a tuple at launch (see launch_env.cc)
      }
      // Accelerate passes section values to the workers through str(): any scalar will do where
      // a string is expected (fsdp_reshard_after_forward: true, or an FSDP 1 strategy name).
      if (spec->type == KeyType::kString && value.kind != Value::Kind::kList &&
          value.kind != Value::Kind::kMap && value.kind != Value::Kind::kString) {
        if (!spec->choices.empty() && !value.is_null()) checker.check_choice(*spec, shown, value);
        continue;
      }
      if (!checker.check_type(*spec, shown, value)) continue;
      if (spec->type == KeyType::kBool && value.kind == Value::Kind::kBool) continue;
      checker.check_choice(*spec, shown, value);
    }
  }
}

int int_or(const Value& root, const char* key, int fallback) {
  const Value* v = root.find(key);
  return v && v->kind == Value::Kind::kInt ? static_cast<int>(v->integer) : fallback;
}

std::vector<std::string> split_ids(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) parts.push_back(part);
  return parts;
}

// gpu_ids: "all", or a list of ids with enough for each machine's processes.
void check_gpu_ids(const Value& root, Checker& checker, int num_processes, int num_machines) {
  const Value* ids = root.find("gpu_ids");
  if (!ids || ids->kind != Value::Kind::kString || ids->text == "all") return;
  const std::vector<std::string> parts = split_ids(ids->text);
  bool ok = !parts.empty();
  for (const std::string& p : parts)
    ok = ok && !p.empty() && std::all_of(p.begin(), p.end(), [](unsigned char c) {
           return std::isdigit(c) || c == ' ';
         });
  if (!ok) {
    checker.problem(ids->mark, "gpu_ids",
                    "'" + ids->text + "' is not a GPU list; use all or ids such as 0,1");
  } else {
    const Value* type = root.find("distributed_type");
    const std::string t = type ? type->text : "";
    const bool several =
        is_multi_device_type(t) || t == "FSDP" || t == "DEEPSPEED" || t == "MEGATRON_LM";
    const int per_machine =
        num_processes > 0 && num_machines > 0 ? num_processes / num_machines : 0;
    if (several && per_machine > static_cast<int>(parts.size()))
      checker.problem(ids->mark, "gpu_ids",
                      "lists " + std::to_string(parts.size()) + " GPU(s) but each machine runs " +
                          std::to_string(per_machine) +
                          " processes (num_processes / num_machines); list " +
                          std::to_string(per_machine) + " ids or use all");
  }
}

void check_cross_fields(const Value& root, Checker& checker) {
  const int num_processes = int_or(root, "num_processes", -1);
  const int num_machines = int_or(root, "num_machines", 1);
  const int machine_rank = int_or(root, "machine_rank", 0);
  auto mark = [&](const char* key) {
    const Value* v = root.find(key);
    return v ? v->mark : Mark{};
  };
  if (root.find("num_processes") && num_processes < 1 && num_processes != -1)
    checker.problem(mark("num_processes"), "num_processes",
                    std::to_string(num_processes) + " is not a number of processes; use 1 or more");
  if (num_machines < 1)
    checker.problem(mark("num_machines"), "num_machines",
                    std::to_string(num_machines) + " is not a number of machines; use 1 or more");
  if (num_processes > 0 && num_machines > 0 && num_processes % num_machines != 0)
    checker.problem(mark("num_processes"), "num_processes",
                    std::to_string(num_processes) + " is not divisible by num_machines " +
                        std::to_string(num_machines) +
                        "; num_processes counts every machine's workers, so use a multiple of " +
                        std::to_string(num_machines));
  if (num_machines > 0 && (machine_rank < 0 || machine_rank >= num_machines))
    checker.problem(mark("machine_rank"), "machine_rank",
                    std::to_string(machine_rank) + " is out of range for num_machines " +
                        std::to_string(num_machines) + "; use 0 to " +
                        std::to_string(num_machines - 1) + ", a different rank on each machine");
  const Value* ip = root.find("main_process_ip");
  if (num_machines > 1 && (!ip || ip->is_null() || ip->text.empty()))
    checker.problem(ip ? ip->mark : mark("num_machines"), "main_process_ip",
                    "missing; with num_machines " + std::to_string(num_machines) +
                        " every machine needs the address of machine 0, e.g. main_process_ip: "
                        "10.0.0.1");
  if (const Value* port = root.find("main_process_port"); port && port->kind == Value::Kind::kInt) {
    if (port->integer < 0 || port->integer > 65535)
      checker.problem(port->mark, "main_process_port",
                      std::to_string(port->integer) +
                          " is not a TCP port; use 1 to 65535 (or 0 "
                          "for a free port on one machine)");
    else if (port->integer == 0 && num_machines > 1)
      checker.problem(port->mark, "main_process_port",
                      "0 (a free port) works on one machine only; give the port every machine "
                      "will use, e.g. 29500");
  }
  check_gpu_ids(root, checker, num_processes, num_machines);
  const Value* type = root.find("distributed_type");
  if (type && type->text == "FSDP") {
    const Value& fsdp = root.find("fsdp_config") ? *root.find("fsdp_config") : Value::map();
    const Value* ram = fsdp.find("fsdp_cpu_ram_efficient_loading");
    const Value* sync = fsdp.find("fsdp_sync_module_states");
    const bool ram_on = !ram || ram->kind != Value::Kind::kBool || ram->boolean;
    const bool sync_off = sync && sync->kind == Value::Kind::kBool && !sync->boolean;
    if (ram_on && sync_off)
      checker.problem(sync->mark, "fsdp_config.fsdp_sync_module_states",
                      "must be true when fsdp_cpu_ram_efficient_loading is true (Accelerate "
                      "refuses this at launch); set it to true or turn the loading off");
  }
}

const Value kEmptyMap = Value::map();

}  // namespace

ClusterConfig::ClusterConfig() : root_(Value::map()) {}

ClusterConfig ClusterConfig::from_value(Value root, const std::string& path,
                                        std::vector<std::string> warnings) {
  ClusterConfig config;
  config.path_ = path;
  config.warnings_ = std::move(warnings);
  Checker checker(path, config.warnings_);
  if (root.is_null())
    checker.refuse(root.mark, "config", "the file is empty; write one with `acc-launch config`");
  if (!root.is_map())
    checker.refuse(root.mark, "config",
                   "expected a mapping of keys such as `distributed_type: MULTI_GPU`, got " +
                       Checker::describe(root));

  if (const Value* env = root.find("compute_environment");
      env && env->kind == Value::Kind::kString && env->text == "AMAZON_SAGEMAKER")
    checker.refuse(env->mark, "compute_environment",
                   "AMAZON_SAGEMAKER jobs are not launched by acc-launch; use `accelerate "
                   "launch` for SageMaker, or write compute_environment: LOCAL_MACHINE");
  migrate_legacy_keys(root, checker);
  restore_meant_strings(root);

  const std::vector<std::string> known = key_names(cluster_keys());
  for (auto& [key, value] : root.entries) {
    const KeySpec* spec = find_cluster_key(key);
    if (!spec) {
      const std::string guess = nearest(key, known);
      checker.problem(
          value.key_mark, key,
          "unknown key" + (guess.empty()
                               ? std::string("; remove it (docs/config.md lists every key)")
                               : "; did you mean " + guess + "? (or remove it)"));
      continue;
    }
    if (checker.check_type(*spec, key, value) && spec->type == KeyType::kString)
      checker.check_choice(*spec, key, value);
  }

  const Value* type = root.find("distributed_type");
  if (!type || type->is_null()) {
    checker.problem(Mark{1, 1}, "distributed_type",
                    "missing; add distributed_type: NO (one process), MULTI_GPU, MULTI_CPU, FSDP, "
                    "DEEPSPEED or MEGATRON_LM");
  } else if (type->kind == Value::Kind::kString && type->text == "XLA") {
    checker.refuse(type->mark, "distributed_type",
                   "XLA (TPU) runs are not launched by acc-launch; use `accelerate launch` on the "
                   "TPU VM, or pick NO, MULTI_GPU or MULTI_CPU");
  }
  if (Value* mp = root.find("mixed_precision"); mp && mp->kind == Value::Kind::kString)
    mp->text = to_lower(mp->text);
  check_sections(root, checker);
  check_cross_fields(root, checker);
  checker.throw_if_any();

  // Defaults that process_config() fills in.
  if (!root.find("compute_environment"))
    root.set("compute_environment", Value::of_string("LOCAL_MACHINE"));
  if (!root.find("num_processes") && root.find("distributed_type")->text == "NO")
    root.set("num_processes", Value::of_int(1));
  config.root_ = std::move(root);
  return config;
}

bool ClusterConfig::has(const std::string& key) const {
  const Value* v = root_.find(key);
  return v && !v->is_null();
}

Mark ClusterConfig::mark_of(const std::string& key) const {
  const Value* v = root_.find(key);
  return v ? v->mark : Mark{};
}

namespace {
const Value* non_null(const Value& root, const std::string& key) {
  const Value* v = root.find(key);
  return v && !v->is_null() ? v : nullptr;
}
}  // namespace

std::string ClusterConfig::compute_environment() const {
  const Value* v = non_null(root_, "compute_environment");
  return v ? v->text : "LOCAL_MACHINE";
}
std::string ClusterConfig::distributed_type() const {
  const Value* v = non_null(root_, "distributed_type");
  return v ? v->text : "NO";
}
std::optional<std::string> ClusterConfig::mixed_precision() const {
  const Value* v = non_null(root_, "mixed_precision");
  return v ? std::optional(v->text) : std::nullopt;
}
bool ClusterConfig::use_cpu() const {
  const Value* v = non_null(root_, "use_cpu");
  return v && v->boolean;
}
bool ClusterConfig::debug() const {
  const Value* v = non_null(root_, "debug");
  return v && v->boolean;
}
int ClusterConfig::num_processes() const {
  return int_or(root_, "num_processes", -1);
}
int ClusterConfig::machine_rank() const {
  return int_or(root_, "machine_rank", 0);
}
int ClusterConfig::num_machines() const {
  return int_or(root_, "num_machines", 1);
}
std::optional<std::string> ClusterConfig::gpu_ids() const {
  const Value* v = non_null(root_, "gpu_ids");
  return v ? std::optional(v->text) : std::nullopt;
}
std::optional<std::string> ClusterConfig::main_process_ip() const {
  const Value* v = non_null(root_, "main_process_ip");
  return v ? std::optional(v->text) : std::nullopt;
}
std::optional<int> ClusterConfig::main_process_port() const {
  const Value* v = non_null(root_, "main_process_port");
  return v ? std::optional(static_cast<int>(v->integer)) : std::nullopt;
}
std::string ClusterConfig::rdzv_backend() const {
  const Value* v = non_null(root_, "rdzv_backend");
  return v ? v->text : "static";
}
bool ClusterConfig::same_network() const {
  const Value* v = non_null(root_, "same_network");
  return v && v->boolean;
}
bool ClusterConfig::enable_cpu_affinity() const {
  const Value* v = non_null(root_, "enable_cpu_affinity");
  return v && v->boolean;
}
const Value& ClusterConfig::section(const std::string& name) const {
  const Value* v = root_.find(name);
  return v && v->is_map() ? *v : kEmptyMap;
}

void ClusterConfig::set(const std::string& key, Value value) {
  root_.set(key, std::move(value));
}

void ClusterConfig::set_section_key(const std::string& section, const std::string& key,
                                    Value value) {
  Value* s = root_.find(section);
  if (!s || !s->is_map()) {
    root_.set(section, Value::map());
    s = root_.find(section);
  }
  s->set(key, std::move(value));
}

void ClusterConfig::erase(const std::string& key) {
  root_.erase(key);
}

namespace {

// A .json file is read as json.load reads it (Accelerate's load_config_from_file): JSON only,
// nothing after the value. YAML, which reads the values, would take trailing text.
void check_json_syntax(const std::string& text, const std::string& path) {
  try {
    const nlohmann::json value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 70: syntax error ..."
    std::string message = e.what();
    std::string where = "1:1";
    const std::string at = "parse error at line ";
    if (const size_t line = message.find(at); line != std::string::npos) {
      const size_t comma = message.find(", column ", line);
      const size_t colon = message.find(": ", line);
      if (comma != std::string::npos && colon != std::string::npos && comma < colon) {
        where = message.substr(line + at.size(), comma - line - at.size()) + ":" +
                message.substr(comma + 9, colon - comma - 9);
        message = message.substr(colon + 2);
      }
    }
    throw ConfigError(path + ":" + where + ": JSON syntax error: " + escape_control(message) +
                      "; fix the file or write it again with `acc-launch config`");
  }
}

}  // namespace

ClusterConfig parse_config(const std::string& text, const std::string& path) {
  std::vector<std::string> warnings;
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (json) check_json_syntax(text, path);
  Value root = detail::parse_yaml(text, path, json, warnings);
  return ClusterConfig::from_value(std::move(root), path, std::move(warnings));
}

ClusterConfig load_config(const std::string& path) {
  std::error_code error;
  ACC_CHECK(!std::filesystem::is_directory(path, error), ConfigError, "the config file ", path,
            " is a directory; pass a file to --config_file, or write one with `acc-launch "
            "config`");
  std::ifstream in(path, std::ios::binary);
  ACC_CHECK(in.good(), ConfigError, "the config file ", path,
            " does not exist or cannot be read; pass an existing file to --config_file, or "
            "write one with `acc-launch config`");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

}  // namespace acc::config
