// SLURM node lists (SLURM_JOB_NODELIST and its kin: "gpu[01-03,7],login1"), expanded by
// expand_slurm_hostlist (launcher/src/nodes/cluster.cc), and the scheduler detection that reads
// them from a SLURM step's environment. ConfigError is the parser's answer to bad input.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "acc/common/error.h"
#include "acc/launcher/nodes/cluster.h"

namespace {

std::string no_resolve(const std::string& node) {
  return node;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string list(reinterpret_cast<const char*>(data), size);
  try {
    if (acc::launcher::expand_slurm_hostlist(list).empty()) __builtin_trap();
  } catch (const acc::ConfigError&) {
  }
  try {
    const std::map<std::string, std::string> environment = {{"SLURM_JOB_ID", "1"},
                                                            {"SLURM_NODEID", "0"},
                                                            {"SLURM_STEP_NUM_NODES", "2"},
                                                            {"SLURM_JOB_NODELIST", list}};
    acc::launcher::detect_cluster(environment, no_resolve);
  } catch (const acc::ConfigError&) {
  }
  return 0;
}
