#pragma once

// The GPUs' health, as NVML reports it, for the two moments a launcher can act on it
// (docs/launch.md, "GPU health"):
// - before the workers start: a GPU the node's workers will use with uncorrected memory errors,
//   pages or rows waiting to be retired or remapped, a failed row remapping, or a recovery action
//   asked by the driver (a reset, a reboot, a drain) makes the node refuse to start them, with one
//   line naming the GPU and why, exit 8;
// - before a restart: the failed attempt's processes must have let go of their GPU memory, or the
//   next attempt may run out of it; the wait is bounded, and a restart follows either way.
// The verdicts are pure, tested over readings; NVML's answers come from host/nvml.h.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace acc::launcher {

class Nvml;

// What NVML answered for one GPU. Empty: it cannot say (NVML_ERROR_NOT_SUPPORTED, a driver
// without the query), which is no fault.
struct GpuHealthReadings {
  // nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE): since the driver was loaded.
  std::optional<unsigned long long> uncorrected_ecc_errors;
  // nvmlDeviceGetRetiredPagesPendingStatus: pages to retire, at the next reset or reboot.
  std::optional<bool> retired_pages_pending;
  // nvmlDeviceGetRemappedRows: rows to remap at the next reset; a remapping that failed.
  std::optional<bool> remapped_rows_pending;
  std::optional<bool> row_remapping_failed;
  // nvmlDeviceGetFieldValues(NVML_FI_DEV_GET_GPU_RECOVERY_ACTION), what nvidia-smi shows as
  // "GPU Recovery Action" and NVIDIA's resiliency extension checks: 0 none, 1 a GPU reset, 2 a
  // node reboot, 3 drain peer-to-peer traffic, 4 drain and reset.
  std::optional<unsigned> recovery_action;
  // A query answered that the GPU fell off the bus (NVML_ERROR_GPU_IS_LOST) or needs a reset
  // (NVML_ERROR_RESET_REQUIRED): those words; else empty.
  std::string lost;
};

// Why a GPU with these readings must not run workers: the reasons, joined by "; ", or "" when
// nothing is wrong or NVML could not say. Pure.
std::string gpu_unfit_reason(const GpuHealthReadings& readings);

// The NVML indices (PCI bus order) of `gpus`, named as CUDA_VISIBLE_DEVICES names them (an index,
// or a UUID or a unique prefix of one), given each NVML GPU's UUID in index order. An entry that
// names no GPU, or a MIG instance (MIG-...), is left out: the check cannot say for it. Pure.
std::vector<unsigned> nvml_indices_of(const std::vector<std::string>& gpus,
                                      const std::vector<std::string>& uuids);

// The pre-flight check: throws GpuError with one line naming each unfit GPU among `gpus`
// (LaunchPlan::worker_gpus) by index and UUID, with its reasons. Does nothing where `nvml` is null
// (no NVIDIA driver) or `gpus` is empty. Blocks for NVML's queries, milliseconds a GPU.
void check_gpu_health(const std::vector<std::string>& gpus, Nvml* nvml);

// Of `pids`, those that hold memory on a GPU by NVML's list of compute processes (pid -> bytes),
// with their bytes. Pure.
std::map<int, unsigned long long> gpu_memory_held_by(
    const std::map<int, unsigned long long>& processes, const std::vector<int>& pids);

// The line printed when the next attempt stops waiting for `held` (pid -> bytes) after `waited`.
std::string describe_gpu_memory_held(const std::map<int, unsigned long long>& held,
                                     std::chrono::milliseconds waited);

}  // namespace acc::launcher
