#pragma once

// Which CPUs each local worker may run on: torchrun's --numa-binding modes, Accelerate's
// --enable_cpu_affinity and DeepSpeed's --bind_cores_to_rank / --bind_core_list. Pure: a topology
// and a choice in, one CPU set per local rank out; the launcher applies them in the child
// (spawn.h) before exec.

#include <string>
#include <vector>

#include "acc/launcher/host/host.h"
#include "acc/launcher/host/topology.h"

namespace acc::launcher {

enum class CpuBindingMode {
  kNone,
  kNode,         // every CPU of the NUMA node of the worker's GPU
  kSocket,       // every CPU of that node's socket
  kExclusive,    // a share of whole physical cores of that node, split among its GPUs' workers
  kCoreComplex,  // one L3 cache group of that node, the largest first, spread over its workers
  kCoreList,     // DeepSpeed: an even split of a CPU list (default: one CPU per physical core)
};

struct CpuBindingChoice {
  CpuBindingMode mode = CpuBindingMode::kNone;
  std::string flag;            // as the user gave it, for messages: "--numa-binding exclusive"
  std::vector<int> core_list;  // kCoreList: the CPUs to split; empty: one per physical core
};

// One CPU set per local rank (ascending CPU ids), only CPUs in topology.allowed_cpus (when it is
// not empty). Local rank i uses GPU i when there are at least as many GPUs as workers; else the
// workers are spread in blocks over the NUMA nodes, as if each had a GPU there. Empty for kNone.
// Throws ConfigError naming choice.flag when the binding cannot apply (fewer physical cores than
// workers for kExclusive, a core list naming a CPU that cannot be used, ...).
std::vector<std::vector<int>> plan_cpu_binding(const CpuTopology& topology,
                                               const CpuBindingChoice& choice, int local_ranks);

// `topology` with its GPUs as CUDA numbers them under CUDA_VISIBLE_DEVICES=`visible` ("2,3": GPU
// 0 is the third in PCI order). Unchanged when `visible` names GPUs by UUID.
CpuTopology with_visible_gpus(CpuTopology topology, const std::string& visible);

// The CPUs of each of `local_ranks` workers for `choice` (empty for none), with host.topology's
// GPUs numbered as CUDA_VISIBLE_DEVICES=`visible_devices` numbers them (the workers' list: empty:
// every GPU in PCI order). Which binding the flags ask for is the plan's to decide, from the
// options (plan/cpu_binding_options.h): this room sits below the command line. Throws ConfigError
// as plan_cpu_binding.
std::vector<std::vector<int>> resolve_cpu_binding(const CpuBindingChoice& choice,
                                                  const HostInfo& host,
                                                  const std::string& visible_devices,
                                                  int local_ranks);

}  // namespace acc::launcher
