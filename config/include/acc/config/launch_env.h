#pragma once

// What `accelerate launch` does with a config (accelerate/commands/launch.py launch_command and
// accelerate/utils/launch.py): which of its launchers runs, and the ACCELERATE_*, FSDP_*,
// MEGATRON_LM_*, PARALLELISM_CONFIG_*, DeepSpeed and FP8 variables the workers get. Pure
// functions of their arguments; thread-safe.

#include <string>
#include <utility>
#include <vector>

#include "acc/config/cluster_config.h"

namespace acc::config {

using EnvEntries = std::vector<std::pair<std::string, std::string>>;

// The launcher `accelerate launch` picks: one process (optionally under mpirun), torchrun, or
// DeepSpeed's launcher (torchrun on one machine).
enum class LaunchPath { kSimple, kMultiGpu, kDeepSpeed };

struct LaunchMode {
  LaunchPath path = LaunchPath::kSimple;
  bool use_fsdp = false;
  bool use_megatron_lm = false;
  bool use_parallelism_config = false;
};

// The launch-mode flags of `accelerate launch`'s command line.
struct ModeFlags {
  bool cpu = false;
  bool multi_gpu = false;
  bool use_deepspeed = false;
  bool use_fsdp = false;
  bool use_megatron_lm = false;
  bool use_parallelism_config = false;
};

// The mode for a config, given the mode flags of the command line. Any of --multi_gpu,
// --use_deepspeed, --use_fsdp, --use_megatron_lm overrides distributed_type entirely and --cpu
// forces one simple launch, as in Accelerate. Throws ConfigError for flags Accelerate refuses
// together (two modes; --use_parallelism_config without --use_fsdp and FSDP 2).
LaunchMode launch_mode(const ClusterConfig& config, const ModeFlags& flags);

// Whether the mode starts one worker per process of num_processes (every path but the simple
// one, where Accelerate starts one process; MULTI_CPU is started here too, see docs/config.md).
bool launches_workers(const ClusterConfig& config, const LaunchMode& mode);

// The variable that restricts visible devices for a distributed type: CUDA_VISIBLE_DEVICES, or
// ZE_AFFINITY_MASK (MULTI_XPU), ASCEND_RT_VISIBLE_DEVICES (MULTI_NPU), ...
std::string visible_devices_variable(const std::string& distributed_type);

// The variables that come from the config's sections and mode, beyond the ones every launch
// sets (ACCELERATE_MIXED_PRECISION, ACCELERATE_USE_CPU, ACCELERATE_DEBUG_MODE, the visible
// devices, OMP_NUM_THREADS): dynamo (not on the DeepSpeed path), FP8 when `mixed_precision` is
// fp8, FSDP/Megatron/parallelism on the torchrun path, DeepSpeed on its path, and
// ACCELERATE_CPU_AFFINITY. `mixed_precision_from_config` tells whether the mixed precision came
// from the file (it is then listed in ACCELERATE_CONFIG_DS_FIELDS). Values are what Python's
// str() gives for what PyYAML loaded, so a worker sees the same strings.
EnvEntries section_env(const ClusterConfig& config, const LaunchMode& mode,
                       const std::string& mixed_precision, bool mixed_precision_from_config);

}  // namespace acc::config
