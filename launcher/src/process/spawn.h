#pragma once

// Starting one worker process: its own process group, killed with the launcher, output on pipes
// (or on terminals of its own).

#include <sys/ioctl.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace acc::launcher {

struct SpawnRequest {
  std::string executable;         // a resolved path (see resolve_executable)
  std::vector<std::string> argv;  // argv[0] is what the user named
  std::vector<std::string> env;   // the complete environment, "KEY=VALUE"
  bool capture_stdout = true;     // else inherits the launcher's stdout
  bool capture_stderr = true;
  // A captured stream read through a terminal of its own (a pseudo-terminal, sized so) instead
  // of a pipe, for a launcher whose own stream is a terminal: the worker's isatty() is true, its
  // output raw (no "\n" to "\r\n"). Not the worker's controlling terminal: no SIGHUP, no job
  // control when it closes.
  std::optional<winsize> stdout_terminal;
  std::optional<winsize> stderr_terminal;
  int stdin_fd = -1;      // becomes the child's stdin when >= 0, else it inherits the launcher's
  std::vector<int> cpus;  // the CPUs the child may run on (sched_setaffinity); empty: inherited
  // A standby (agent/standbys.h): this end of its channel becomes the child's descriptor 3, and
  // `output_fd`, when >= 0, its stdout and stderr (captured streams come at the hand-over).
  int channel_fd = -1;
  int output_fd = -1;
};

struct SpawnedProcess {
  pid_t pid = -1;      // also its process group id
  int stdout_fd = -1;  // read end (of a pipe or a terminal), non-blocking, or -1
  int stderr_fd = -1;
  int exec_error = 0;  // see await_exec: the child's errno, negated if setting its CPUs failed
  std::string name;    // argv[0], for messages
};

// vforks and execs. The child leads its own process group, gets SIGKILL if the launcher dies
// (PR_SET_PDEATHSIG, checked against a launcher that died before the call), and starts with
// default signal handling. Returns once the child has exec'd or failed to (vfork); await_exec
// then says which. Throws LaunchError when it cannot fork. Only
// async-signal-safe calls run between fork and exec.
SpawnedProcess spawn_process(const SpawnRequest& request);

// Gives the standby `pid` (started with a channel_fd, at rest on the other end, `channel`) the
// worker that `request` describes: its environment and the descriptors that become its stdin,
// stdout and stderr (pipes or terminals made here as spawn_process makes them, or the launcher's
// own), in one message; the standby then runs the worker's program in its own process
// (docs/goodput.md). Returns it as spawn_process would have. Throws SystemError when the message
// cannot go (the standby is gone): the caller spawns instead.
SpawnedProcess hand_over(const SpawnRequest& request, pid_t pid, int channel);

// Says whether the child exec'd (it has exec'd or failed to by the time spawn_process returns).
// Throws LaunchError naming the program and the reason when it failed (or its CPUs could not
// be set) (the child has then exited with 127; the caller reaps it). Does not block.
void await_exec(SpawnedProcess& process);

// Finds `program` as execvp would in `path` (a PATH value). Throws LaunchError naming it.
std::string resolve_executable(const std::string& program, const std::string& path);

// The NULL-terminated array of C strings an exec call takes, pointing into `strings`.
std::vector<char*> c_strings(const std::vector<std::string>& strings);

}  // namespace acc::launcher
