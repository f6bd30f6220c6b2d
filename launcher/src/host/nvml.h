#pragma once

// NVIDIA's management library (NVML), loaded at run time with dlopen, so that the launcher links
// no CUDA library and runs the same where there is none. Asked for three things:
// - "is this process computing": the stall watch asks, once a poll, which processes ran kernels
//   (SM utilization per process), so that a rank waiting on its GPU with a blocking synchronize,
//   which uses no CPU, is not taken for a hung one;
// - each GPU's health, before the workers start (host/gpu_health.h);
// - which processes hold memory on the GPUs, before a restart (the failed attempt's must be gone).

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "host/gpu_health.h"

namespace acc::launcher {

// What a process's share of a GPU's SM time must reach, in percent, to count as busy on it.
inline constexpr unsigned kBusyGpuPercent = 10;

class Nvml {
 public:
  // This machine's library (libnvidia-ml.so.1, or the file ACC_NVML_LIBRARY names), loaded and
  // initialised at the first call; null where there is none, no driver or no GPU. The same for
  // the launcher's whole life, so the cost of nvmlInit (up to seconds without the persistence
  // daemon) is paid once, and only by a job whose silence needs explaining. Kept until the
  // process ends (no nvmlShutdown). Thread-safe. Never throws.
  static Nvml* machine();
  // A client of its own of this machine's library (the same library as machine()'s), for a
  // thread other than the agent's: sm_utilization() keeps where each client left off. Null where
  // there is none. Never throws.
  static std::unique_ptr<Nvml> open_machine();

  // Loads `library` and initialises NVML. Throws Error naming the library and what failed.
  explicit Nvml(const std::string& library);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  unsigned device_count() const { return device_count_; }

  // Each process's highest SM utilization, in percent, over every GPU and every sample NVML
  // took since the previous call (at the first call: its buffer, the last few seconds).
  // Processes that ran nothing are absent. Devices that cannot say (NVML_ERROR_NOT_SUPPORTED)
  // are skipped. Never throws.
  std::map<int, unsigned> sm_utilization();

  // The UUID of GPU `index` in NVML's order (PCI bus order), "GPU-...", or "" where NVML cannot
  // say. Never throws.
  std::string uuid(unsigned index);

  // What NVML says about GPU `index`'s health: uncorrected ECC errors, pages waiting to be
  // retired, rows waiting to be remapped or that failed to, the recovery action the driver asks
  // for. A query that NVML cannot answer (NVML_ERROR_NOT_SUPPORTED, a driver without the
  // function) stays empty: it is no fault. Never throws.
  GpuHealthReadings health(unsigned index);

  // The processes with a compute context on any GPU, each with the GPU memory it holds in bytes
  // (0 where NVML cannot say), summed over the GPUs. Empty where the driver cannot list them.
  // Never throws.
  std::map<int, unsigned long long> compute_processes();

 private:
  struct Api;
  void* library_ = nullptr;
  Api* api_ = nullptr;
  unsigned device_count_ = 0;
  unsigned long long last_seen_us_ = 0;
};

}  // namespace acc::launcher
