#pragma once

// What /proc says of a process, read in one place: its stat line (state, parent, CPU time), its
// name, command line, environment, signal mask and descendants. Every reader of /proc in the
// launcher (the agent's teardown through RealOs, the stall watch, the hang report, `acc-launch
// stacks`) goes through these. Never throws: a process that is gone reads as empty.

#include <string>
#include <utility>
#include <vector>

namespace acc::launcher::proc {

// /proc/PID/stat, or /proc/PID/task/TID/stat with `tid`.
struct Stat {
  bool ok = false;
  std::string state;  // R, S, D, T, Z
  int parent = 0;
  double cpu_seconds = 0;  // user + system
};
Stat stat(int pid, int tid = 0);

// /proc/PID/FILE (or /proc/PID/task/TID/FILE) whole; empty when it cannot be read.
std::string read(int pid, const std::string& file, int tid = 0);

// /proc/PID/comm without its newline: "python3", "pt_data_worker"; "?" when it is gone.
std::string name(int pid);

// /proc/PID/cmdline, one string an argument.
std::vector<std::string> command_line(int pid);

// The value of `variable` in the environment PID was started with; empty when absent.
std::string environment_value(int pid, const std::string& variable);

// Whether PID catches `signal` (its SigCgt mask in /proc/PID/status).
bool catches_signal(int pid, int signal);

// Every process of this machine (as far as this pid namespace shows), lowest pid first.
std::vector<int> processes();

// The threads of PID, lowest first.
std::vector<int> threads(int pid);

// The processes PID started and theirs, parents before children: (pid, parent) pairs.
std::vector<std::pair<int, int>> descendants(int pid);

// Whether PID has `path` open (one of /proc/PID/fd links to it); false when PID is gone.
bool has_open(int pid, const std::string& path);

// What the stall watch samples of its workers at each poll (state and CPU time, and the parents
// of a process NVML finds busy), behind an interface so that its tests script a worker's CPU time
// and state with a fake (FakeProc in tests/launcher/stall_watch_test.cc) instead of burning CPU
// for a window.
class Reader {
 public:
  virtual ~Reader() = default;
  // As proc::stat(pid). Never throws.
  virtual Stat stat(int pid) = 0;
  // This machine's /proc; one object for the process, never destroyed. Thread-safe.
  static Reader& machine();
};

}  // namespace acc::launcher::proc
