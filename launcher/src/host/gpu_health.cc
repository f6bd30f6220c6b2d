#include "host/gpu_health.h"

#include <cstdio>

#include "acc/common/error.h"
#include "host/nvml.h"
#include "output/log.h"

namespace acc::launcher {
namespace {

// NVML_GPU_RECOVERY_ACTION_*, in the words of nvml.h's documentation of each.
std::string describe_recovery_action(unsigned action) {
  switch (action) {
    case 1:
      return "the driver asks for a GPU reset";
    case 2:
      return "the driver asks for a node reboot";
    case 3:
      return "the driver asks to drain peer-to-peer traffic";
    case 4:
      return "the driver asks to drain and reset the GPU";
    default:
      return "the driver asks for recovery action " + std::to_string(action);
  }
}

std::string gibibytes(unsigned long long bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

}  // namespace

std::string gpu_unfit_reason(const GpuHealthReadings& r) {
  std::vector<std::string> reasons;
  if (!r.lost.empty()) reasons.push_back(r.lost);
  if (r.uncorrected_ecc_errors.value_or(0) > 0)
    reasons.push_back(std::to_string(*r.uncorrected_ecc_errors) +
                      " uncorrected ECC error(s) since the driver was loaded");
  if (r.retired_pages_pending.value_or(false))
    reasons.push_back("memory pages wait to be retired (a reset retires them)");
  if (r.row_remapping_failed.value_or(false)) reasons.push_back("a row remapping failed");
  if (r.remapped_rows_pending.value_or(false))
    reasons.push_back("memory rows wait to be remapped (a reset remaps them)");
  if (r.recovery_action.value_or(0) != 0)
    reasons.push_back(describe_recovery_action(*r.recovery_action));
  std::string joined;
  for (const std::string& reason : reasons) joined += (joined.empty() ? "" : "; ") + reason;
  return joined;
}

std::vector<unsigned> nvml_indices_of(const std::vector<std::string>& gpus,
                                      const std::vector<std::string>& uuids) {
  std::vector<unsigned> indices;
  for (const std::string& gpu : gpus) {
    std::optional<unsigned> found;
    if (gpu.rfind("GPU-", 0) == 0) {
      for (unsigned i = 0; i < uuids.size(); ++i) {
        if (uuids[i].rfind(gpu, 0) != 0) continue;
        if (found) {  // a prefix of two UUIDs names neither, as for CUDA
          found.reset();
          break;
        }
        found = i;
      }
    } else if (!gpu.empty() && gpu.find_first_not_of("0123456789") == std::string::npos &&
               gpu.size() < 10 && std::stoul(gpu) < uuids.size()) {
      found = static_cast<unsigned>(std::stoul(gpu));
    }
    if (found) indices.push_back(*found);
  }
  return indices;
}

void check_gpu_health(const std::vector<std::string>& gpus, Nvml* nvml) {
  if (!nvml || gpus.empty()) return;
  std::vector<std::string> uuids;
  for (unsigned i = 0; i < nvml->device_count(); ++i) uuids.push_back(nvml->uuid(i));
  std::string refusals;
  const std::vector<unsigned> indices = nvml_indices_of(gpus, uuids);
  for (unsigned index : indices) {
    const std::string why = gpu_unfit_reason(nvml->health(index));
    if (why.empty()) continue;
    refusals += (refusals.empty() ? "" : "; ") + ("GPU " + std::to_string(index)) +
                (uuids[index].empty() ? "" : " (" + uuids[index] + ")") + ": " + why;
  }
  ACC_CHECK(refusals.empty(), GpuError, refusals,
            "; not starting the workers on this node (another node may run the job)");
  log::debug("GPU health: {} of the workers' {} GPU(s) asked through NVML, none unfit",
             indices.size(), gpus.size());
}

std::map<int, unsigned long long> gpu_memory_held_by(
    const std::map<int, unsigned long long>& processes, const std::vector<int>& pids) {
  std::map<int, unsigned long long> held;
  for (int pid : pids)
    if (auto it = processes.find(pid); it != processes.end()) held.emplace(pid, it->second);
  return held;
}

std::string describe_gpu_memory_held(const std::map<int, unsigned long long>& held,
                                     std::chrono::milliseconds waited) {
  std::string who;
  unsigned long long bytes = 0;
  for (const auto& [pid, size] : held) {
    who += (who.empty() ? "" : ", ") + std::to_string(pid);
    bytes += size;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", static_cast<double>(waited.count()) / 1000.0);
  return std::string("the previous attempt's pid") + (held.size() > 1 ? "s " : " ") + who +
         " still hold" + (held.size() > 1 ? "" : "s") +
         (bytes > 0 ? " " + gibibytes(bytes) + " of" : "") + " GPU memory after " + seconds +
         " s; restarting anyway";
}

}  // namespace acc::launcher
