#pragma once

// The one map from errors to acc-launch's exit codes (docs/errors.md has the table). Every
// command's main catches at its edge and calls exit_code_for().

#include <exception>
#include <string>

#include "acc/common/error.h"

namespace acc {

// Exit codes of acc-launch itself, when it stops before or without its workers' status.
inline constexpr int kExitInternal = 1;     // a bug, or the OS refused something (SystemError)
inline constexpr int kExitConfig = 2;       // ConfigError: a bad flag, file or variable
inline constexpr int kExitNetwork = 3;      // NetworkError, StoreError
inline constexpr int kExitTimeout = 4;      // TimeoutError: a rendezvous or wait ran out of time
inline constexpr int kExitUnkillable = 5;   // a worker outlived SIGKILL (stuck in the kernel)
inline constexpr int kExitBackend = 6;      // BackendError: Gloo or NCCL missing or failing
inline constexpr int kExitNodeLost = 7;     // a node of a static job went silent or away
inline constexpr int kExitBadGpu = 8;       // GpuError: a GPU of this node is unfit (NVML)
inline constexpr int kExitCannotRun = 127;  // LaunchError: the program cannot be run

// The exit code for an exception caught at a command's edge. Never throws.
inline int exit_code_for(const std::exception& error) {
  if (auto* interrupted = dynamic_cast<const InterruptedError*>(&error))
    return 128 + interrupted->signal();
  if (dynamic_cast<const ConfigError*>(&error)) return kExitConfig;
  if (dynamic_cast<const StoreError*>(&error)) return kExitNetwork;
  if (dynamic_cast<const NetworkError*>(&error)) return kExitNetwork;
  if (dynamic_cast<const TimeoutError*>(&error)) return kExitTimeout;
  if (dynamic_cast<const BackendError*>(&error)) return kExitBackend;
  if (dynamic_cast<const GpuError*>(&error)) return kExitBadGpu;
  if (dynamic_cast<const LaunchError*>(&error)) return kExitCannotRun;
  return kExitInternal;
}

// True for the launcher's own failures that another try of the job may cure: the network or a
// lost store (3), a timeout or a hang (4), a worker stuck in the kernel on this host (5), a lost
// node of a static job (7), an unfit GPU on this host (8). Not a mistake in the input (2), a
// program that cannot run (127) or a bug (1): those fail again.
// 5 and 8 are faults of this host, not of the job: retrying here fails again until the host is
// repaired, but a scheduler that retries places the job again (Kubernetes on a new pod, SLURM's
// requeue after the node is drained), where another host runs it. Reporting them as permanent
// would end a job that a working node would finish.
inline bool is_retryable_launcher_exit(int code) {
  return code == kExitNetwork || code == kExitTimeout || code == kExitUnkillable ||
         code == kExitNodeLost || code == kExitBadGpu;
}

// --retryable_exit_code: the status a launcher's own failure exits with, `retryable` (e.g. 138,
// which Kubeflow's ExitCode restart policy retries) for the codes above, else `code` unchanged.
// Never for a worker's status passed through. 0 leaves every code alone.
inline int launcher_exit(int code, int retryable) {
  return retryable != 0 && is_retryable_launcher_exit(code) ? retryable : code;
}

// The one-line message for it: the error's own words, or "internal error: ..." for what is not
// an acc::Error (a bug).
inline std::string exit_message_for(const std::exception& error) {
  if (dynamic_cast<const SystemError*>(&error)) return std::string("system error: ") + error.what();
  if (dynamic_cast<const Error*>(&error)) return error.what();
  return std::string("internal error: ") + error.what();
}

}  // namespace acc
