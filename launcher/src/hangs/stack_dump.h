#pragma once

// Collects the stacks of running workers for the hang report, without stopping them:
//   Python workers (those whose /proc/PID/status shows a handler for stack_dump_signal(), which
//   python_stack_hook.h installs): the signal, then their faulthandler file;
//   native workers: `eu-stack -p PID` (elfutils), else `gdb -batch -p PID`, else what
//   /proc/PID/task/*/{stat,wchan} say of each thread.
// The parsers are pure and take out what differs between processes for no reason (addresses,
// thread ids, argument values), so equal stacks compare equal.

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "hangs/hang_report.h"
#include "process/os.h"

namespace acc::launcher {

struct StackTarget {
  int pid = 0;
  std::string worker_dir;  // where the Python hook writes, and native tool output goes
  // A worker's descendant: no gdb, which takes seconds per process and would eat the workers'
  // budget (Python's dump, eu-stack, else /proc).
  bool descendant = false;
};

// The stacks of all targets, in their order, collected in parallel, with the processes, the clock
// and /proc of `os`. Blocks for at most `budget` of its clock; a tool that has not finished by then
// is killed and the /proc view is used. Never throws.
std::vector<WorkerStack> collect_stacks(const std::vector<StackTarget>& targets,
                                        std::chrono::milliseconds budget, Os& os);

WorkerStack parse_faulthandler(std::string_view text);
WorkerStack parse_gdb(std::string_view text);
WorkerStack parse_eu_stack(std::string_view text, int pid);

}  // namespace acc::launcher
