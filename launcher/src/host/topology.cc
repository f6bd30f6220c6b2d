#include "acc/launcher/host/topology.h"

#include <sched.h>

#include <algorithm>
#include <filesystem>

#include "acc/common/files.h"
#include "acc/common/int_ranges.h"
#include "acc/common/strings.h"

namespace acc::launcher {
namespace fs = std::filesystem;
namespace {

// sysfs numbers are decimal or, for PCI ids and classes, 0x-prefixed hexadecimal.
long read_number(const fs::path& path, long fallback) {
  const std::string text = read_file(path);
  try {
    return std::stol(text, nullptr, 0);
  } catch (const std::exception&) {
    return fallback;
  }
}

std::vector<int> read_list(const fs::path& path) {
  return parse_int_ranges(read_file(path)).value_or(std::vector<int>{});
}

// Directories named <prefix><number>, by number.
std::vector<int> numbered_entries(const fs::path& dir, const std::string& prefix) {
  std::vector<int> numbers;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const std::optional<int> number = parse_int(rest);
    if (number && *number >= 0) numbers.push_back(*number);
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

CpuInfo read_cpu(const fs::path& cpu_dir, int id) {
  CpuInfo cpu;
  cpu.id = id;
  const fs::path dir = cpu_dir / ("cpu" + std::to_string(id));
  cpu.package = static_cast<int>(read_number(dir / "topology/physical_package_id", 0));
  cpu.core = static_cast<int>(read_number(dir / "topology/core_id", id));
  const std::vector<int> l3 = read_list(dir / "cache/index3/shared_cpu_list");
  if (!l3.empty()) cpu.l3_group = l3.front();
  return cpu;
}

std::vector<int> read_gpu_numa_nodes(const fs::path& pci_dir) {
  std::vector<fs::path> devices;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(pci_dir, ec)) devices.push_back(entry.path());
  std::sort(devices.begin(), devices.end());  // names are PCI addresses: domain:bus:device.fn
  std::vector<int> nodes;
  for (const fs::path& device : devices) {
    if (read_number(device / "vendor", 0) != 0x10de) continue;
    const long pci_class = read_number(device / "class", 0) >> 8;
    if (pci_class != 0x0300 && pci_class != 0x0302) continue;  // VGA or 3D controller
    nodes.push_back(static_cast<int>(std::max(0L, read_number(device / "numa_node", -1))));
  }
  return nodes;
}

}  // namespace

CpuTopology read_cpu_topology(const std::string& root) {
  const fs::path sys = fs::path(root) / "sys";
  const fs::path cpu_dir = sys / "devices/system/cpu";
  CpuTopology topology;
  for (int id : read_list(cpu_dir / "online")) topology.cpus.push_back(read_cpu(cpu_dir, id));
  const fs::path node_dir = sys / "devices/system/node";
  for (int node : numbered_entries(node_dir, "node")) {
    std::vector<int> cpus;
    for (int cpu : read_list(node_dir / ("node" + std::to_string(node)) / "cpulist"))
      if (std::any_of(topology.cpus.begin(), topology.cpus.end(),
                      [cpu](const CpuInfo& c) { return c.id == cpu; }))
        cpus.push_back(cpu);
    topology.numa_nodes[node] = cpus;
  }
  topology.gpu_numa_nodes = read_gpu_numa_nodes(sys / "bus/pci/devices");
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
