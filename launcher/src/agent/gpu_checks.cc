#include "agent/gpu_checks.h"

#include <poll.h>
#include <string.h>

#include <algorithm>
#include <chrono>

#include "acc/common/error.h"
#include "host/gpu_health.h"
#include "host/nvml.h"
#include "output/log.h"

namespace acc::launcher {

void GpuChecks::start_health_check() {
  if (plan_.worker_gpus.empty()) return;
  health_check_ = std::async(
      std::launch::async, [gpus = plan_.worker_gpus] { check_gpu_health(gpus, Nvml::machine()); });
}

std::string GpuChecks::health_check_refusal() {
  if (!health_check_.valid()) return "";
  try {
    health_check_.get();
  } catch (const GpuError& e) {
    if (plan_.rdzv_backend != "static" || plan_.nnodes == 1) throw;
    return e.what();
  }
  return "";
}

void GpuChecks::await_release(const std::vector<int>& pids, const std::function<void()>& keep_alive,
                              const std::function<bool(int)>& stops_the_job) {
  Nvml* nvml = plan_.worker_gpus.empty() ? nullptr : Nvml::machine();
  if (!nvml) return;
  constexpr std::chrono::milliseconds kStep{100};
  const Os::Clock::time_point start = os_.now();
  for (;;) {
    const auto held = gpu_memory_held_by(nvml->compute_processes(), pids);
    if (held.empty()) return;
    const Os::Clock::time_point now = os_.now();
    if (now - start >= plan_.gpu_release_timeout) {
      log::warn(describe_gpu_memory_held(
          held, std::chrono::duration_cast<std::chrono::milliseconds>(now - start)));
      return;
    }
    keep_alive();
    std::vector<pollfd> none;
    for (int sig : os_.wait(none, std::min(now + kStep, start + plan_.gpu_release_timeout)))
      if (stops_the_job(sig))
        throw InterruptedError(sig, std::string("stopped by SIG") + sigabbrev_np(sig) +
                                        " while waiting for the GPUs' memory");
  }
}

}  // namespace acc::launcher
