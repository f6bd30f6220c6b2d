#pragma once

// The keys of Accelerate's LOCAL_MACHINE `ClusterConfig`
// (accelerate/commands/config/config_args.py) and of its nested sections: type, default, allowed
// values, the launch flag and the worker environment variable each one maps to. Static tables;
// thread-safe to read.

#include <string>
#include <string_view>
#include <vector>

#include "acc/config/value.h"

namespace acc::config {

enum class KeyType {
  kBool,        // true/false (YAML 1.1 spellings yes/no/on/off too)
  kInt,         // an integer
  kNumber,      // an integer or a decimal number
  kString,      // a string; numbers are taken as their text
  kStringList,  // a list of strings
  kDict,        // a nested section
};

// How `accelerate launch` takes a key as a flag (`--<key>`, launch.py) and how argparse turns the
// text into the value whose str() a worker sees: `--gradient_clipping 1` gives "1.0" (float),
// `--megatron_lm_use_custom_fsdp false` gives "True" (Python's bool() of a non-empty string).
enum class FlagArg {
  kNone,            // not a launch flag
  kSwitch,          // store_true: no value; True when given
  kText,            // str: the text as given
  kInt,             // int()
  kFloat,           // float()
  kPyBool,          // bool(): True unless the text is empty
  kStrToBool,       // str_to_bool(): yes/true/1/... -> 1, no/false/0/... -> 0
  kStrToBoolTuple,  // tuple(map(str_to_bool, x.split(","))): a list of 1/0
};

struct KeySpec {
  std::string_view name;
  KeyType type;
  std::string_view default_text;          // as docs/config.md shows it; "" when none
  std::vector<std::string_view> choices;  // empty: any value of the type
  std::string_view flag;                  // the acc-launch flag that overrides it, or ""
  FlagArg flag_arg;                       // kNone unless `--<name>` is a launch flag
  std::string_view env;                   // the worker variable it sets, or ""
  std::string_view doc;
  bool nullable = true;  // `key: null` is accepted (means "not set")
};

// The top-level keys, in the order docs/config.md lists them.
const std::vector<KeySpec>& cluster_keys();

// The keys of a nested section ("fsdp_config", "deepspeed_config", "megatron_lm_config",
// "fp8_config", "dynamo_config", "parallelism_config", "mpirun_config"); empty for another name.
// Keys are listed with their canonical spelling (fsdp_*, fp8_*, dynamo_* prefixes included).
const std::vector<KeySpec>& section_keys(std::string_view section);

// The spec of a top-level key, or nullptr.
const KeySpec* find_cluster_key(std::string_view name);
// The spec of a key of a section (with or without the section's prefix), or nullptr.
const KeySpec* find_section_key(std::string_view section, std::string_view name);

// The canonical name Accelerate gives a nested key at launch: fsdp_config keys without "fsdp"
// get "fsdp_", fp8_config keys without "fp8" get "fp8_", dynamo_config keys get "dynamo_".
std::string canonical_section_key(std::string_view section, std::string_view key);

// The candidate closest to `name` by edit distance, or "" when none is close enough to suggest.
std::string nearest(std::string_view name, const std::vector<std::string>& candidates);

// A key that `accelerate launch` also takes as the flag `--<key>`, and the section it belongs to
// ("" for a top-level key). Every launch flag of that kind comes from this list, so the schema is
// the one table of them.
struct LaunchFlag {
  const KeySpec* spec;
  std::string_view section;
};
const std::vector<LaunchFlag>& launch_flags();

// The value a flag's text gives, as argparse converts it for that flag (FlagArg). Throws
// ConfigError naming the flag when the text is not a number where one is needed, or outside
// the key's choices.
Value flag_value(const KeySpec& spec, const std::string& text);

// Whether an Accelerate distributed type runs a process per device (MULTI_GPU, MULTI_XPU, ...).
bool is_multi_device_type(std::string_view distributed_type);  // MULTI_GPU, MULTI_XPU, ...

}  // namespace acc::config
