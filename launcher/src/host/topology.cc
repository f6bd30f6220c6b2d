#include "acc/launcher/host/topology.h"

#include <sched.h>

#include <algorithm>
#include <filesystem>

#include "acc/common/int_ranges.h"
#include "acc/common/strings.h"
#include "host/machine_files.h"

namespace acc::launcher {
namespace fs = std::filesystem;
namespace {

// sysfs numbers are decimal or, for PCI ids and classes, 0x-prefixed hexadecimal.
long read_number(const MachineFiles& files, const fs::path& path, long fallback) {
  const std::string text = files.read(path);
  try {
    return std::stol(text, nullptr, 0);
  } catch (const std::exception&) {
    return fallback;
  }
}

std::vector<int> read_list(const MachineFiles& files, const fs::path& path) {
  return parse_int_ranges(files.read(path)).value_or(std::vector<int>{});
}

// Directories named <prefix><number>, by number.
std::vector<int> numbered_entries(const MachineFiles& files, const fs::path& dir,
                                  const std::string& prefix) {
  std::vector<int> numbers;
  for (const fs::path& entry : files.entries(dir)) {
    const std::string name = entry.filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const std::optional<int> number = parse_int(rest);
    if (number && *number >= 0) numbers.push_back(*number);
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

CpuInfo read_cpu(const MachineFiles& files, const fs::path& cpu_dir, int id) {
  CpuInfo cpu;
  cpu.id = id;
  const fs::path dir = cpu_dir / ("cpu" + std::to_string(id));
  cpu.package = static_cast<int>(read_number(files, dir / "topology/physical_package_id", 0));
  cpu.core = static_cast<int>(read_number(files, dir / "topology/core_id", id));
  const std::vector<int> l3 = read_list(files, dir / "cache/index3/shared_cpu_list");
  if (!l3.empty()) cpu.l3_group = l3.front();
  return cpu;
}

std::vector<int> read_gpu_numa_nodes(const MachineFiles& files, const fs::path& pci_dir) {
  std::vector<int> nodes;
  // Sorted by name: PCI addresses, domain:bus:device.fn.
  for (const fs::path& device : files.entries(pci_dir)) {
    if (read_number(files, device / "vendor", 0) != 0x10de) continue;
    const long pci_class = read_number(files, device / "class", 0) >> 8;
    if (pci_class != 0x0300 && pci_class != 0x0302) continue;  // VGA or 3D controller
    nodes.push_back(static_cast<int>(std::max(0L, read_number(files, device / "numa_node", -1))));
  }
  return nodes;
}

}  // namespace

CpuTopology read_cpu_topology(const std::string& root) {
  const MachineFiles files(root);
  const fs::path cpu_dir = "sys/devices/system/cpu";
  CpuTopology topology;
  for (int id : read_list(files, cpu_dir / "online"))
    topology.cpus.push_back(read_cpu(files, cpu_dir, id));
  const fs::path node_dir = "sys/devices/system/node";
  for (int node : numbered_entries(files, node_dir, "node")) {
    std::vector<int> cpus;
    for (int cpu : read_list(files, node_dir / ("node" + std::to_string(node)) / "cpulist"))
      if (std::any_of(topology.cpus.begin(), topology.cpus.end(),
                      [cpu](const CpuInfo& c) { return c.id == cpu; }))
        cpus.push_back(cpu);
    topology.numa_nodes[node] = cpus;
  }
  topology.gpu_numa_nodes = read_gpu_numa_nodes(files, "sys/bus/pci/devices");
  return topology;
}

std::vector<int> allowed_cpus_of_this_process() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

}  // namespace acc::launcher
