#pragma once

// Makes Python workers print every thread's traceback on a signal, without touching the user's
// script: a sitecustomize.py of ours, embedded in the binary and written to the run directory,
// goes first on the workers' PYTHONPATH. It registers faulthandler for the dump signal, writing to
// a file per process that stack_dump.h reads, then runs the sitecustomize it shadows (if any).
// Beside it goes the acc_launch package (python/acc_launch/, as the wheel has it): what a program
// imports to beat, open a named section or checkpoint, and the recorder of torch.distributed's
// calls into the worker's progress file (acc/common/progress_file.h), which the sitecustomize
// starts.

#include <string>

#include "acc/launcher/plan/plan.h"

namespace acc::launcher {

// The dump signal: SIGRTMIN+7. SIGUSR1/SIGUSR2 belong to the user (training scripts use them
// for checkpoint-and-exit on preemption) and SIGQUIT/SIGABRT end the process. Real-time signals
// are free for applications; the first few are the ones libraries take (POSIX timers, some
// profilers), so we stay clear of them. The launcher only ever sends it to a process whose
// /proc/PID/status shows a handler for it: its default action would end the worker.
int stack_dump_signal();

// Where the Python hook of process `pid` writes its tracebacks, in the worker's directory.
std::string python_stack_file(const std::string& worker_dir, int pid);

// The worker's progress file (ACC_PROGRESS_FILE), which the launcher creates before the worker
// starts.
std::string progress_file_path(const std::string& worker_dir);

// Writes the hook and the acc_launch package into `run_dir`/python and returns that directory.
// Throws LaunchError.
std::string install_python_stack_hook(const std::string& run_dir);

// The variables that enable the hook for a worker whose files go in `worker_dir`: PYTHONPATH
// (hook_dir first, then `pythonpath`, the one the worker would have had), ACC_STACK_DIR,
// ACC_STACK_SIGNAL, and PYTHONFAULTHANDLER=1 (tracebacks on crashes too) unless
// `has_faulthandler_setting`. ACC_PROGRESS_FILE is set with or without the hook
// (agent/worker_environment.h).
EnvList python_stack_hook_env(const std::string& hook_dir, const std::string& worker_dir,
                              const std::string& pythonpath, bool has_faulthandler_setting);

}  // namespace acc::launcher
