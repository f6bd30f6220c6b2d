#pragma once

// An Accelerate LOCAL_MACHINE config (`accelerate config` / `acc-launch config` writes one):
// loading from YAML or JSON with validation, typed access, and writing back.
//
// Loading follows `accelerate launch`: YAML 1.1 scalars are read as PyYAML reads them, legacy
// keys are migrated (`fp16`, top-level `dynamo_backend`), and missing keys take the defaults of
// Accelerate's ClusterConfig. Where Accelerate would crash later or silently do something else,
// loading fails instead with one line per problem: `FILE:LINE:COL: KEY: what is wrong; the fix`.
// All functions are thread-safe (no shared state); none blocks except on file I/O.

#include <optional>
#include <string>
#include <vector>

#include "acc/config/value.h"

namespace acc::config {

class ClusterConfig {
 public:
  // A config with Accelerate's defaults for `distributed_type` (not written by default).
  ClusterConfig();

  // The file it came from ("" when built in memory).
  const std::string& path() const { return path_; }
  // The keys as loaded, after migration, in file order; defaults are not added.
  const Value& root() const { return root_; }
  // Problems that do not stop a launch (unknown nested keys, duplicate keys), one line each.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Whether the file set `key` (a top-level key) to something other than null.
  bool has(const std::string& key) const;
  // Where `key` was written, or {0, 0}.
  Mark mark_of(const std::string& key) const;

  std::string compute_environment() const;             // LOCAL_MACHINE
  std::string distributed_type() const;                // NO, MULTI_GPU, FSDP, ...
  std::optional<std::string> mixed_precision() const;  // unset: the launch uses "no"
  bool use_cpu() const;
  bool debug() const;
  int num_processes() const;  // -1: not set (the launch needs --num_processes)
  int machine_rank() const;
  int num_machines() const;
  std::optional<std::string> gpu_ids() const;
  std::optional<std::string> main_process_ip() const;
  std::optional<int> main_process_port() const;
  std::string rdzv_backend() const;
  bool same_network() const;
  bool enable_cpu_affinity() const;
  // A nested section (fsdp_config, ...): its map, or an empty map when absent or null.
  const Value& section(const std::string& name) const;

  // Setters used by the wizard and `config update`; `value` must suit the key's type.
  void set(const std::string& key, Value value);
  void set_section_key(const std::string& section, const std::string& key, Value value);
  void erase(const std::string& key);

  // Builds from a parsed document, checking it; see load_config(). `warnings` are kept first.
  // Throws ConfigError.
  static ClusterConfig from_value(Value root, const std::string& path,
                                  std::vector<std::string> warnings = {});

 private:
  std::string path_;
  Value root_;
  std::vector<std::string> warnings_;
};

// Parses YAML (or JSON) text; `path` names the file in messages and decides JSON number rules
// (a `.json` path reads numbers as json.load does). Throws ConfigError with every problem, one
// line each, or a single line for a config acc-launch does not run (SageMaker, TPU).
ClusterConfig parse_config(const std::string& text, const std::string& path);

// Reads and parses a file. Throws ConfigError when it is missing or unreadable, as parse_config.
ClusterConfig load_config(const std::string& path);

// The file as `accelerate config` writes it: keys sorted, null values and empty sections left
// out; JSON (indent 2, sorted) when `path` ends in .json, else YAML. Never throws.
std::string to_yaml(const ClusterConfig& config);
std::string to_json(const ClusterConfig& config);

// Writes to `path` (format by extension), creating the parent directory when `create_parent`.
// Throws ConfigError when the file cannot be written.
void save_config(const ClusterConfig& config, const std::string& path, bool create_parent);

}  // namespace acc::config
