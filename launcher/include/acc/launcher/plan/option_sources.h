#pragma once

// Where a setting comes from: the one place that applies the precedence command line > scheduler
// > config file > default. The command line is parsed into LaunchOptions (cli.h), which records
// each option it set; a scheduler or a hostfile (cluster.h) and a config file (config_merge.h)
// only propose values, and apply_proposals keeps those that outrank what is there. Pure.

#include <optional>
#include <string>

#include "acc/launcher/cli/options.h"

namespace acc::launcher {

// What one layer says about the options that more than one layer sets. Unset: it says nothing.
// A scheduler speaks torchrun's spellings, a config file Accelerate's; where a setting has both
// (nnodes and num_machines, ...) a word for either is a word for the setting.
struct OptionProposals {
  Source source = Source::kDefault;  // the layer: kScheduler or kConfigFile
  std::optional<std::string> nnodes{};
  std::optional<int> node_rank{};
  std::optional<std::string> nproc_per_node{};
  std::optional<std::string> master_addr{};
  std::optional<int> master_port{};
  std::optional<std::string> rdzv_id{};
  std::optional<std::string> rdzv_backend{};
  std::optional<std::string> gpu_ids{};
  std::optional<int> num_processes{};  // a total over all machines
  std::optional<int> num_machines{};
  std::optional<int> machine_rank{};
  std::optional<std::string> main_process_ip{};
  std::optional<int> main_process_port{};
  std::optional<std::string> mixed_precision{};
  std::optional<bool> cpu{};
  std::optional<bool> debug{};
  std::optional<int> num_cpu_threads_per_process{};
};

// The source of a setting: of `name`, or of its other spelling where that is higher
// ("num_processes" for "nproc_per_node" and back; likewise nnodes / num_machines, node_rank /
// machine_rank, master_addr / main_process_ip, master_port / main_process_port).
Source setting_source(const LaunchOptions& options, const std::string& name);

// Sets each value `proposals` has whose setting's source is below proposals.source, and records
// that source for it; leaves the others. Where it sets torchrun's spelling of a setting it drops
// Accelerate's from a lower layer, so layers may be applied in any order. Does not throw.
void apply_proposals(const OptionProposals& proposals, LaunchOptions& options);

// The store's port as the layers named it: --master_port or Accelerate's --main_process_port (0:
// a free port), or the port of a static --rdzv_endpoint (torchrun: it stands for
// master_addr:master_port; 0 where it names none); nullopt where none named one. The build of
// the plan and the fan-out head both take it from here. Throws ConfigError where both port
// spellings are set and differ, or for a malformed endpoint.
std::optional<int> named_store_port(const LaunchOptions& options);

}  // namespace acc::launcher
