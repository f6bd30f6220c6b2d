#pragma once

// The CPU and NUMA layout of this machine as sysfs describes it, read under a root directory so
// that tests can point the launcher at a fake /sys (ACC_HOST_ROOT).

#include <map>
#include <string>
#include <vector>

namespace acc::launcher {

struct CpuInfo {
  int id = 0;
  int package = 0;    // socket: topology/physical_package_id
  int core = 0;       // topology/core_id, unique within its package
  int l3_group = -1;  // lowest CPU sharing its L3 cache (cache/index3/shared_cpu_list); -1 unknown
};

struct CpuTopology {
  std::vector<CpuInfo> cpus;                   // online CPUs, ascending id
  std::map<int, std::vector<int>> numa_nodes;  // node -> its online CPUs; empty when unknown
  std::vector<int> gpu_numa_nodes;             // NVIDIA GPUs in PCI address order -> NUMA node
  std::vector<int> allowed_cpus;               // CPUs the launcher may run on; empty: all
};

// Reads <root>/sys/devices/system/{cpu,node} and <root>/sys/bus/pci/devices (NVIDIA display and
// 3D controllers, vendor 0x10de; a numa_node of -1 counts as node 0). Does not fill
// allowed_cpus. Never throws: what cannot be read is left out (no file: no CPUs, no nodes).
CpuTopology read_cpu_topology(const std::string& root);

// The CPUs this process may run on (sched_getaffinity); empty when it cannot tell.
std::vector<int> allowed_cpus_of_this_process();

}  // namespace acc::launcher
