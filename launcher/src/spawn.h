#pragma once

// Starting one worker process: its own process group, killed with the launcher, output on pipes.

#include <sys/types.h>

#include <string>
#include <vector>

namespace acc::launcher {

struct SpawnRequest {
  std::string executable;         // a resolved path (see resolve_executable)
  std::vector<std::string> argv;  // argv[0] is what the user named
  std::vector<std::string> env;   // the complete environment, "KEY=VALUE"
  bool capture_stdout = true;     // else inherits the launcher's stdout
  bool capture_stderr = true;
};

struct SpawnedProcess {
  pid_t pid = -1;      // also its process group id
  int stdout_fd = -1;  // read end, non-blocking, or -1
  int stderr_fd = -1;
};

// Forks and execs. The child leads its own process group, gets SIGKILL if the launcher dies
// (PR_SET_PDEATHSIG, checked against a launcher that died before the call), and starts with
// default signal handling. Returns once the exec has happened. Throws LaunchError when it could
// not (the child is reaped). Only async-signal-safe calls run between fork and exec.
SpawnedProcess spawn_process(const SpawnRequest& request);

// Finds `program` as execvp would in `path` (a PATH value). Throws LaunchError naming it.
std::string resolve_executable(const std::string& program, const std::string& path);

}  // namespace acc::launcher
