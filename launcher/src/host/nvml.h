#pragma once

// The GPUs' side of "is this process computing": NVIDIA's management library (NVML), loaded at
// run time with dlopen, so that the launcher links no CUDA library and runs the same where there
// is none. The stall watch asks it, once a poll, which processes ran kernels (SM utilization per
// process), so that a rank waiting on its GPU with a blocking synchronize, which uses no CPU, is
// not taken for a hung one.

#include <map>
#include <string>

namespace acc::launcher {

// What a process's share of a GPU's SM time must reach, in percent, to count as busy on it.
inline constexpr unsigned kBusyGpuPercent = 10;

class Nvml {
 public:
  // This machine's library (libnvidia-ml.so.1, or the file ACC_NVML_LIBRARY names), loaded and
  // initialised at the first call; null where there is none, no driver or no GPU. The same for
  // the launcher's whole life, so the cost of nvmlInit (up to seconds without the persistence
  // daemon) is paid once, and only by a job whose silence needs explaining. Never throws.
  static Nvml* machine();

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

 private:
  struct Api;
  void* library_ = nullptr;
  Api* api_ = nullptr;
  unsigned device_count_ = 0;
  unsigned long long last_seen_us_ = 0;
};

}  // namespace acc::launcher
