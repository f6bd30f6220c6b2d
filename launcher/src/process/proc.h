#pragma once

// What /proc says of a process, read in one place: its stat line (state, parent, CPU time), its
// name, command line, environment, signal mask, children and descendants, and what it says of this
// program and this machine. Every reader of /proc in the launcher goes through these (the units
// that are unit-tested through Reader below). Never throws: a process that is gone reads as empty.

#include <string>
#include <utility>
#include <vector>

namespace acc::launcher::proc {

// /proc/PID/stat, or /proc/PID/task/TID/stat with `tid`.
struct Stat {
  bool ok = false;
  std::string state;  // R, S, D, T, Z
  int parent = 0;
  int session = 0;         // the session's id (getsid)
  double cpu_seconds = 0;  // user + system
  long long started = 0;   // seconds since the epoch at its start; 0: not known
  // When it started, in clock ticks after the boot (starttime): with the pid, names one process
  // for as long as the machine runs, as a pid alone does not once it is reused.
  unsigned long long start_ticks = 0;
};
Stat stat(int pid, int tid = 0);

// /proc/PID/FILE (or /proc/PID/task/TID/FILE) whole; empty when it cannot be read.
std::string read(int pid, const std::string& file, int tid = 0);

// /proc/PID/comm without its newline: "python3", "pt_data_worker"; "?" when it is gone.
std::string name(int pid);

// /proc/PID/cmdline, one string an argument.
std::vector<std::string> command_line(int pid);

// Where /proc/PID/cwd leads: PID's working directory; "" when it cannot be read.
std::string working_directory(int pid);

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

// The children of PID that the kernel lists in /proc/PID/task/PID/children (its main thread's:
// every child of a single-threaded process, and of the launcher, which forks from that thread).
std::vector<int> children(int pid);

// Everything the launcher reads from /proc, behind one interface, so that the units which read it
// (the stall watch, the stack dumper, the status sampler, `acc-launch stacks`, the agent's teardown
// through RealOs) are tested over a scripted fake (tests/launcher/fake_proc.h) rather than over
// real processes that burn CPU or sleep in the kernel. Each method is its free function above on
// the machine; none throws: a process that is gone reads as empty.
class Reader {
 public:
  virtual ~Reader() = default;
  virtual Stat stat(int pid) = 0;
  virtual Stat thread_stat(int pid, int tid) = 0;
  // /proc/PID/task/TID/FILE whole, as read(pid, file, tid).
  virtual std::string thread_file(int pid, int tid, const std::string& file) = 0;
  virtual std::vector<int> threads(int pid) = 0;
  virtual std::string name(int pid) = 0;
  virtual std::vector<std::string> command_line(int pid) = 0;
  virtual std::string working_directory(int pid) = 0;
  virtual bool catches_signal(int pid, int signal) = 0;
  virtual std::vector<int> processes() = 0;
  virtual std::vector<std::pair<int, int>> descendants(int pid) = 0;
  virtual std::vector<int> children(int pid) = 0;
  // The user that owns PID (the owner of /proc/PID); -1 when it is gone.
  virtual long owner(int pid) = 0;
  // Whether PID has `path` (resolved) open, as has_open(pid, path).
  virtual bool has_open(int pid, const std::string& path) = 0;
  // This program's file, its links resolved (/proc/self/exe); "" when it cannot be read.
  virtual std::string executable() = 0;
  // The most files a process may open (/proc/sys/fs/nr_open); 0 when it cannot be read.
  virtual long long nr_open() = 0;
  // Where this process's pids are numbered: the machine's boot (/proc/sys/kernel/random/boot_id)
  // and this process's pid namespace (/proc/self/ns/pid), one string. Two processes see the same
  // pid as the same process only where their pid_space() is the same (a container with its own
  // pid namespace shares a host's /dev/shm under `docker --ipc=host`). "" when it cannot be read.
  virtual std::string pid_space() = 0;
  // The resident memory of PID in bytes (/proc/PID/statm); 0 when it is gone.
  virtual double resident_bytes(int pid) = 0;
  // The machine's MemAvailable in bytes (/proc/meminfo); 0 when it cannot be read.
  virtual double available_memory_bytes() = 0;

  // This machine's /proc; one object for the process, never destroyed. Thread-safe.
  static Reader& machine();
};

}  // namespace acc::launcher::proc
