#pragma once

// The complete environment of one worker, decided in one place: the spawn and the standbys use
// it, and --dry_run prints it (with placeholders for the run directory it has not made), so that
// they cannot drift. Each variable comes from one of five sources, and where several set one
// name, the source later in kEnvPrecedence wins: the table below is the whole rule, and
// docs/launch.md ("Which value wins") shows it.

#include <array>
#include <map>
#include <string>
#include <string_view>

#include "acc/launcher/plan/plan.h"

namespace acc::launcher {

// Where a worker's files go. The dry run passes placeholders ("<run dir>").
struct WorkerPlace {
  std::string run_dir;          // the run directory (TORCHELASTIC_TIMER_FILE's default)
  std::string worker_dir;       // <run dir>/attempt_N/<local rank>: error.json, progress, stacks
  std::string python_hook_dir;  // <run dir>/python; empty: the Python hook is off
};

enum class EnvSource {
  kDefault,           // chosen for the user where nothing sets the variable under any name
  kUsersEnvironment,  // the launcher's own environment
  kTorchrunContract,  // RANK, WORLD_SIZE, MASTER_ADDR, ... (plan.h torchrun_contract)
  kLaunchOptions,     // flags, the scheduler's and the config file's settings (plan.env)
  kLauncher,          // what acc-launch's own machinery needs in every worker
};

struct EnvSourceRow {
  EnvSource source;
  std::string_view name;
  std::string_view holds;
};

// The sources, lowest precedence first.
inline constexpr std::array<EnvSourceRow, 5> kEnvPrecedence = {{
    {EnvSource::kDefault, "default",
     "OMP_NUM_THREADS (the worker's CPUs under a binding, else 1 for several workers), "
     "TORCH_NCCL_ASYNC_ERROR_HANDLING, GLOO_SOCKET_IFNAME, the Flight Recorder's variables, "
     "TORCHELASTIC_TIMER_FILE; each left out where the launcher's environment sets it under any "
     "of its names"},
    {EnvSource::kUsersEnvironment, "the launcher's environment",
     "everything the launcher was started with (but the job secret file's variable)"},
    {EnvSource::kTorchrunContract, "torchrun's contract",
     "RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*"},
    {EnvSource::kLaunchOptions, "flags, scheduler, config file",
     "Accelerate's variables, --gpu_ids, --num_cpu_threads_per_process, ... (among themselves: "
     "command line > scheduler > config file, option_sources.h)"},
    {EnvSource::kLauncher, "acc-launch",
     "ACC_PROGRESS_FILE, the Python hook's PYTHONPATH entry and variables, a virtual local "
     "rank's CUDA_VISIBLE_DEVICES"},
}};

// What one source sets in worker `spec`, in order (a later entry replaces an earlier one of the
// same name). `below` is what the sources before it decided: the hook puts its directory before
// the PYTHONPATH the worker would have had. Pure: touches no file.
EnvList env_of_source(EnvSource source, const LaunchPlan& plan, const WorkerSpec& spec,
                      const Round& round, const std::map<std::string, std::string>& environment,
                      const WorkerPlace& place, const std::map<std::string, std::string>& below);

// What worker `spec` starts with: every source's variables, in kEnvPrecedence's order, each
// replacing the value of the same name before it. `environment` is the launcher's. Pure.
std::map<std::string, std::string> worker_environment(
    const LaunchPlan& plan, const WorkerSpec& spec, const Round& round,
    const std::map<std::string, std::string>& environment, const WorkerPlace& place);

}  // namespace acc::launcher
