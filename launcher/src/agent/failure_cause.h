#pragma once

// Why a worker failed, in one line for the failure table's root cause: the kernel's OOM killer
// (its memory cgroup's counters, cgroup v1 and v2), a CUDA out-of-memory or NCCL error or the
// last line of a Python traceback in its stderr, or the signal that ended it and who sent it.
// Reading the counters is I/O (read_oom_counters); the rest is pure, for the tests.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host/machine_files.h"

namespace acc::launcher {

// The OOM killer's counters as the launcher sees them: the memory cgroup it runs in (its
// workers' too, unless something moved them) and the machine's.
struct OomCounters {
  std::string cgroup;                            // the memory cgroup's path, "" when none was found
  std::optional<std::int64_t> cgroup_oom_kills;  // memory.events' or memory.oom_control's oom_kill
  std::optional<std::int64_t> limit_bytes;       // memory.max / memory.limit_in_bytes, when set
  std::optional<std::int64_t> machine_oom_kills;  // /proc/vmstat's oom_kill
};

// Reads them from `files` (proc/vmstat, proc/self/cgroup, sys/fs/cgroup/...); a file that is not
// there or not readable leaves its field empty. Never throws.
OomCounters read_oom_counters(const MachineFiles& files = MachineFiles());

// The memory cgroup's path in /proc/<pid>/cgroup's text: v1's "memory" controller line, else
// v2's "0::" line; "" when neither.
struct CgroupPath {
  std::string path;
  bool v2 = false;
};
std::optional<CgroupPath> memory_cgroup(const std::string& proc_cgroup_text);
// "oom_kill N" in memory.events (v2) or memory.oom_control (v1).
std::optional<std::int64_t> parse_oom_kill(const std::string& text);

// What the launcher knows of a worker's end.
struct FailureFacts {
  int exit_code = 0;
  int signal = 0;
  long peak_rss_kib = -1;
  std::vector<std::string> stderr_tail;
  std::string error_message;  // from its error file (PyTorch's @record), if any
  // Who sent `signal`, where the launcher knows: "the launcher", "the launcher (stall)", ...;
  // "" when none of the launcher's did.
  std::string sent_by;
  OomCounters before;  // at the attempt's start
  OomCounters after;   // when the failure was seen
};

// One line: "killed by the kernel's OOM killer: the memory cgroup /a's limit (150 MiB) was
// reached; peak RSS 149 MiB", "CUDA out of memory: torch.OutOfMemoryError: ...", "NCCL error:
// ...", "Python exception: ValueError: bad", "SIGSEGV: a crash (invalid memory access)". ""
// when nothing more than the exit code is known.
std::string explain_failure(const FailureFacts& facts);

// "150 MiB", "2.0 GiB".
std::string format_bytes(std::int64_t bytes);

}  // namespace acc::launcher
