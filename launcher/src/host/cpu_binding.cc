#include "acc/launcher/host/cpu_binding.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "acc/common/error.h"
#include "acc/common/int_ranges.h"
#include "acc/common/strings.h"

namespace acc::launcher {
namespace {

using CpuSet = std::vector<int>;

// The CPUs the plan may hand out, with what the topology says of each. A machine whose sysfs
// could not be read still binds: every allowed CPU is its own core on socket 0, NUMA node 0.
class Usable {
 public:
  explicit Usable(const CpuTopology& topology) {
    const std::set<int> allowed(topology.allowed_cpus.begin(), topology.allowed_cpus.end());
    auto usable = [&](int cpu) { return allowed.empty() || allowed.count(cpu) > 0; };
    for (const CpuInfo& cpu : topology.cpus)
      if (usable(cpu.id)) info_[cpu.id] = cpu;
    if (topology.cpus.empty())
      for (int cpu : topology.allowed_cpus) info_[cpu] = CpuInfo{cpu, 0, cpu, -1};
    for (const auto& [node, cpus] : topology.numa_nodes)
      for (int cpu : cpus)
        if (info_.count(cpu)) nodes_[node].push_back(cpu);
    if (nodes_.empty() && !info_.empty())
      for (const auto& [cpu, info] : info_) nodes_[0].push_back(cpu);
  }

  const std::map<int, CpuSet>& nodes() const { return nodes_; }
  const CpuInfo& info(int cpu) const { return info_.at(cpu); }
  bool has(int cpu) const { return info_.count(cpu) > 0; }
  CpuSet all() const {
    CpuSet cpus;
    for (const auto& [cpu, info] : info_) cpus.push_back(cpu);
    return cpus;
  }

  // `cpus` grouped by a key (the group's lowest CPU first), groups in order of their lowest CPU.
  template <typename Key>
  std::vector<CpuSet> group(const CpuSet& cpus, Key key) const {
    std::map<decltype(key(info_.begin()->second)), CpuSet> by_key;
    for (int cpu : cpus) by_key[key(info(cpu))].push_back(cpu);
    std::vector<CpuSet> groups;
    for (auto& [k, members] : by_key) groups.push_back(std::move(members));
    std::sort(groups.begin(), groups.end());
    return groups;
  }
  std::vector<CpuSet> physical_cores(const CpuSet& cpus) const {
    return group(cpus, [](const CpuInfo& c) { return std::make_pair(c.package, c.core); });
  }

 private:
  std::map<int, CpuInfo> info_;
  std::map<int, CpuSet> nodes_;
};

// The NUMA node each local rank's device sits on.
std::vector<int> device_nodes(const CpuTopology& topology, const Usable& usable,
                              const CpuBindingChoice& choice, int local_ranks) {
  std::vector<int> nodes;
  const auto& gpus = topology.gpu_numa_nodes;
  if (static_cast<int>(gpus.size()) >= local_ranks) {
    for (int rank = 0; rank < local_ranks; ++rank) {
      ACC_CHECK(usable.nodes().count(gpus[rank]), ConfigError, choice.flag, ": GPU ", rank,
                " is on NUMA node ", gpus[rank],
                ", where acc-launch may use no CPU; leave the binding out or widen the CPUs "
                "acc-launch may run on");
      nodes.push_back(gpus[rank]);
    }
    return nodes;
  }
  std::vector<int> known;
  for (const auto& [node, cpus] : usable.nodes()) known.push_back(node);
  for (int rank = 0; rank < local_ranks; ++rank)
    nodes.push_back(known[static_cast<size_t>(rank) * known.size() / local_ranks]);
  return nodes;
}

// Where rank `rank` stands among the ranks whose device is on the same node, and how many those
// are.
std::pair<int, int> place_on_node(const std::vector<int>& nodes, int rank) {
  int before = 0, count = 0;
  for (int other = 0; other < static_cast<int>(nodes.size()); ++other) {
    if (nodes[other] != nodes[rank]) continue;
    if (other < rank) ++before;
    ++count;
  }
  return {before, count};
}

CpuSet flatten(const std::vector<CpuSet>& groups, size_t begin, size_t end) {
  CpuSet cpus;
  for (size_t i = begin; i < end; ++i) cpus.insert(cpus.end(), groups[i].begin(), groups[i].end());
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

// Ranks sharing a node split its physical cores; the first ones get one more where they do not
// divide evenly.
CpuSet exclusive_share(const Usable& usable, const CpuBindingChoice& choice, int node,
                       std::pair<int, int> place) {
  const auto [index, sharing] = place;
  const std::vector<CpuSet> cores = usable.physical_cores(usable.nodes().at(node));
  const int per_rank = static_cast<int>(cores.size()) / sharing;
  ACC_CHECK(per_rank >= 1, ConfigError, choice.flag, ": NUMA node ", node, " has ", cores.size(),
            " physical core(s) that acc-launch may use for ", sharing,
            " workers; use --numa-binding node or fewer workers");
  const int extra = static_cast<int>(cores.size()) % sharing;
  const int begin = index * per_rank + std::min(index, extra);
  const int end = begin + per_rank + (index < extra ? 1 : 0);
  return flatten(cores, begin, end);
}

// Largest L3 group first, then the lowest CPU; ranks sharing a node take the groups in turn.
CpuSet core_complex_share(const Usable& usable, int node, std::pair<int, int> place) {
  const CpuSet& cpus = usable.nodes().at(node);
  std::vector<CpuSet> groups = usable.group(cpus, [](const CpuInfo& c) { return c.l3_group; });
  std::stable_sort(groups.begin(), groups.end(),
                   [](const CpuSet& a, const CpuSet& b) { return a.size() > b.size(); });
  return groups[static_cast<size_t>(place.first) % groups.size()];
}

// DeepSpeed's split: each rank gets len/ranks consecutive CPUs of the list; the rest is unused.
std::vector<CpuSet> split_core_list(const Usable& usable, const CpuBindingChoice& choice,
                                    int local_ranks) {
  CpuSet list = choice.core_list;
  if (list.empty())
    for (const CpuSet& core : usable.physical_cores(usable.all())) list.push_back(core.front());
  for (int cpu : list)
    ACC_CHECK(usable.has(cpu), ConfigError, choice.flag, ": CPU ", cpu,
              " is not one acc-launch may use (", format_int_ranges(usable.all()),
              "); list only those");
  const size_t per_rank = list.size() / static_cast<size_t>(local_ranks);
  ACC_CHECK(per_rank >= 1, ConfigError, choice.flag, ": ", list.size(), " CPU(s) for ", local_ranks,
            " workers; give at least one CPU per worker");
  std::vector<CpuSet> sets;
  for (int rank = 0; rank < local_ranks; ++rank) {
    CpuSet cpus(list.begin() + rank * per_rank, list.begin() + (rank + 1) * per_rank);
    std::sort(cpus.begin(), cpus.end());
    sets.push_back(cpus);
  }
  return sets;
}

}  // namespace

std::vector<std::vector<int>> plan_cpu_binding(const CpuTopology& topology,
                                               const CpuBindingChoice& choice, int local_ranks) {
  if (choice.mode == CpuBindingMode::kNone || local_ranks < 1) return {};
  const Usable usable(topology);
  ACC_CHECK(!usable.nodes().empty(), ConfigError, choice.flag,
            ": cannot tell which CPUs this machine has (no /sys/devices/system/cpu/online); leave "
            "the binding out");
  if (choice.mode == CpuBindingMode::kCoreList) return split_core_list(usable, choice, local_ranks);

  const std::vector<int> nodes = device_nodes(topology, usable, choice, local_ranks);
  std::vector<CpuSet> sets;
  for (int rank = 0; rank < local_ranks; ++rank) {
    const int node = nodes[rank];
    switch (choice.mode) {
      case CpuBindingMode::kNode:
        sets.push_back(usable.nodes().at(node));
        break;
      case CpuBindingMode::kSocket: {
        const int package = usable.info(usable.nodes().at(node).front()).package;
        CpuSet cpus;
        for (int cpu : usable.all())
          if (usable.info(cpu).package == package) cpus.push_back(cpu);
        sets.push_back(cpus);
        break;
      }
      case CpuBindingMode::kExclusive:
        sets.push_back(exclusive_share(usable, choice, node, place_on_node(nodes, rank)));
        break;
      case CpuBindingMode::kCoreComplex:
        sets.push_back(core_complex_share(usable, node, place_on_node(nodes, rank)));
        break;
      default:
        ACC_ASSERT(false);
    }
  }
  return sets;
}

CpuTopology with_visible_gpus(CpuTopology topology, const std::string& visible) {
  auto ids = parse_int_ranges(visible);
  // UUIDs (GPU-...) or MIG names cannot be matched to PCI addresses here: PCI order stays.
  if (!ids || visible.find('-') != std::string::npos || visible.empty()) return topology;
  std::vector<int> nodes;
  for (const std::string& id : split(visible, ',')) {  // in the listed order: 2,0 is GPU 2 first
    const int index = parse_int(id).value_or(-1);
    if (index >= 0 && index < static_cast<int>(topology.gpu_numa_nodes.size()))
      nodes.push_back(topology.gpu_numa_nodes[index]);
  }
  topology.gpu_numa_nodes = nodes;
  return topology;
}

std::vector<std::vector<int>> resolve_cpu_binding(const CpuBindingChoice& choice,
                                                  const HostInfo& host,
                                                  const std::string& visible_devices,
                                                  int local_ranks) {
  if (choice.mode == CpuBindingMode::kNone) return {};
  const CpuTopology topology = host.cpu_topology();
  return plan_cpu_binding(
      visible_devices.empty() ? topology : with_visible_gpus(topology, visible_devices), choice,
      local_ranks);
}

}  // namespace acc::launcher
