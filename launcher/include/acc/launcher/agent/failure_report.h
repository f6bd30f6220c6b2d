#pragma once

// The table acc-launch prints when a worker group fails, and the exit status it then returns.
// Pure: formatting only (error_file.h reads what PyTorch's @record wrote).

#include <string>
#include <vector>

namespace acc::launcher {

struct WorkerOutcome {
  int rank = 0;
  int local_rank = 0;
  std::string host;
  int node = -1;  // set for a worker of another node (its node rank), whose details stay there
  int pid = 0;
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;     // the signal that ended it, or 0
  std::string time;   // when its exit was seen, "2026-11-22 10:04:05.123"
  std::string log_file;
  std::string error_file;                // path, or empty when the worker wrote none
  std::string error_message;             // from the error file
  std::string traceback;                 // from the error file
  std::vector<std::string> stderr_tail;  // its last stderr lines
  std::string cause;                     // why, in one line (failure_cause.h); may be empty
  bool root_cause = false;
  bool stopped_by_launcher = false;  // ended by our SIGTERM/SIGKILL after another failure
};

// "1", or "SIGSEGV (11)".
std::string describe_exit(const WorkerOutcome& outcome);

// The launcher's exit status for a failed group: the root cause's exit code, or 128+N for a
// worker ended by signal N.
int failure_exit_status(const WorkerOutcome& root_cause);

// The whole report: one table row per worker, then the root cause's details.
std::string format_failure_report(const std::string& program, int attempts,
                                  const std::vector<WorkerOutcome>& outcomes);

}  // namespace acc::launcher
