#pragma once

// Which CPU binding the options ask for: torchrun's --numa-binding, Accelerate's
// --enable_cpu_affinity (or a config file's), DeepSpeed's --bind_cores_to_rank and
// --bind_core_list. Decided here, where the plan reads the options, so that host/cpu_binding.h
// (the CPU sets for a choice, over the machine's topology) knows nothing of the command line.

#include "acc/launcher/cli/options.h"
#include "acc/launcher/host/cpu_binding.h"

namespace acc::launcher {

// The binding the options ask for (kNone: none). Pure. Throws ConfigError when two flags ask for
// different ones or a --bind_core_list is not a CPU list.
CpuBindingChoice choose_cpu_binding(const LaunchOptions& options);

}  // namespace acc::launcher
