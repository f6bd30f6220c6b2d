#include "plan/cpu_binding_choice.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "acc/common/error.h"
#include "acc/common/int_ranges.h"

namespace acc::launcher {

CpuBindingChoice choose_cpu_binding(const LaunchOptions& o) {
  std::vector<CpuBindingChoice> asked;
  if (!o.numa_binding.empty()) {
    static const std::map<std::string, CpuBindingMode> kModes = {
        {"node", CpuBindingMode::kNode},
        {"socket", CpuBindingMode::kSocket},
        {"exclusive", CpuBindingMode::kExclusive},
        {"core-complex", CpuBindingMode::kCoreComplex}};
    auto mode = kModes.find(o.numa_binding);
    ACC_CHECK(mode != kModes.end(), ConfigError, "--numa-binding ", o.numa_binding,
              ": expected node, socket, exclusive or core-complex");
    asked.push_back({mode->second, "--numa-binding " + o.numa_binding, {}});
  }
  if (o.enable_cpu_affinity) asked.push_back({CpuBindingMode::kNode, "--enable_cpu_affinity", {}});
  if (o.bind_cores_to_rank || !o.bind_core_list.empty()) {
    CpuBindingChoice choice{CpuBindingMode::kCoreList, "--bind_cores_to_rank", {}};
    if (!o.bind_core_list.empty()) {
      auto list = parse_int_ranges(o.bind_core_list);
      ACC_CHECK(list && !list->empty(), ConfigError, "--bind_core_list ", o.bind_core_list,
                ": expected CPU ids and ranges such as 0-7,16-23");
      choice.core_list = *list;
      choice.flag = "--bind_core_list " + o.bind_core_list;
    }
    asked.push_back(choice);
  }
  // A config file's enable_cpu_affinity (ACCELERATE_CPU_AFFINITY=1) gives way to any flag.
  const bool config_affinity = std::any_of(
      o.extra_env.begin(), o.extra_env.end(),
      [](const auto& kv) { return kv.first == "ACCELERATE_CPU_AFFINITY" && kv.second == "1"; });
  if (asked.empty() && config_affinity)
    asked.push_back({CpuBindingMode::kNode, "enable_cpu_affinity (config file)", {}});
  ACC_CHECK(asked.size() <= 1, ConfigError, asked.size() > 1 ? asked[0].flag : "", " and ",
            asked.size() > 1 ? asked[1].flag : "", " both bind the workers' CPUs; give one");
  return asked.empty() ? CpuBindingChoice{} : asked.front();
}

}  // namespace acc::launcher
