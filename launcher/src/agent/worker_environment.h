#pragma once

// The complete environment of one worker, built in one place: the spawn uses it, and --dry_run
// prints it (with placeholders for the run directory it has not made), so the two cannot drift.

#include <map>
#include <string>

#include "acc/launcher/plan/plan.h"

namespace acc::launcher {

// Where a worker's files go. The dry run passes placeholders ("<run dir>").
struct WorkerPlace {
  std::string run_dir;          // the run directory (TORCHELASTIC_TIMER_FILE's default)
  std::string worker_dir;       // <run dir>/attempt_N/<local rank>: error.json, progress, stacks
  std::string python_hook_dir;  // <run dir>/python; empty: the Python hook is off
};

// What worker `spec` starts with: the launcher's `environment`, then, in this order of
// precedence, the torchrun contract (worker_env), the Python hook's PYTHONPATH and variables,
// ACC_PROGRESS_FILE, TORCHELASTIC_TIMER_FILE, and the defaults that yield to the launcher's own
// setting (OMP_NUM_THREADS of the worker's CPUs, the plan's env_defaults, GLOO_SOCKET_IFNAME,
// the Flight Recorder's). Pure: touches no file.
std::map<std::string, std::string> worker_environment(
    const LaunchPlan& plan, const WorkerSpec& spec, const Round& round,
    const std::map<std::string, std::string>& environment, const WorkerPlace& place);

}  // namespace acc::launcher
