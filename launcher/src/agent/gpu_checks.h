#pragma once

// The agent's checks of its workers' GPUs (docs/launch.md, "GPU health"): the pre-flight health
// check before joining, and before a restart the wait for the last attempt's workers to let go
// of their GPU memory. Nothing on a node whose workers have no GPU.

#include <functional>
#include <future>
#include <string>
#include <vector>

#include "acc/launcher/plan/plan.h"
#include "process/os.h"

namespace acc::launcher {

class GpuChecks {
 public:
  // Both must outlive the checks.
  GpuChecks(const LaunchPlan& plan, Os& os) : plan_(plan), os_(os) {}

  // Starts the health check on a thread of its own: NVML's answers take tens of milliseconds
  // (24 ms on an H200: nvmlInit, a device handle, the ECC count), most of a one-node launch, so
  // they are asked while the network pre-flight and the rest of the set-up run. Call after the
  // launcher's signals are taken: the thread must not take a stop signal.
  void start_health_check();
  // Waits for the health check. A node with an unfit GPU takes no place in an elastic round, so
  // that a spare takes it: throws its GpuError. A static job of several nodes cannot go on
  // without it: returns the refusal, for the agent to join and end the job at once for every
  // node, instead of leaving them to wait out their join timeout. Empty when every GPU is fit.
  std::string health_check_refusal();

  // Before the next attempt: waits until none of `pids` (the last attempt's workers) holds GPU
  // memory, or the new ones may run out of it. Bounded by plan.gpu_release_timeout, then one
  // line and the restart goes on. Calls `keep_alive` at each step (the wait may outlast a short
  // keep-alive window); throws InterruptedError for a signal that `stops_the_job` meanwhile.
  void await_release(const std::vector<int>& pids, const std::function<void()>& keep_alive,
                     const std::function<bool(int)>& stops_the_job);

 private:
  const LaunchPlan& plan_;
  Os& os_;
  std::future<void> health_check_;
};

}  // namespace acc::launcher
