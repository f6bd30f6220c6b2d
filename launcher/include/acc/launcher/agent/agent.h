#pragma once

// The agent: runs one node's worker group from a LaunchPlan to its end. Starts the workers,
// routes their output, sees each exit the moment it happens (signalfd for SIGCHLD, no polling
// interval), stops the whole group on the first failure, restarts it while --max_restarts
// allows, forwards the launcher's signals, and reports.

#include <map>
#include <memory>
#include <string>

#include "acc/launcher/nodes/membership.h"
#include "acc/launcher/plan/plan.h"

namespace acc::launcher {

class Os;

class Agent {
 public:
  // `environment` is what every worker inherits beneath the plan's variables; `hostname` names
  // this node to the others in an elastic job.
  Agent(LaunchPlan plan, std::map<std::string, std::string> environment,
        const std::string& hostname = "localhost");
  // The same over another Os (tests: a scripted fake), which must outlive the agent.
  Agent(LaunchPlan plan, std::map<std::string, std::string> environment,
        const std::string& hostname, Os& os);
  // The same with the given membership instead of the plan's (tests: a scripted one).
  Agent(LaunchPlan plan, std::map<std::string, std::string> environment, Os& os,
        std::unique_ptr<Membership> membership);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Blocks until the job ends. Returns acc-launch's exit status: 0 when every worker of an
  // attempt exited 0; the root-cause worker's exit code (128+N for signal N) after the last
  // restart; 128+N when the launcher itself received signal N; 5 (kExitUnkillable) when a
  // worker outlived SIGKILL by --kill_timeout (named on stderr; no restart). Throws LaunchError
  // when a worker cannot be started (after stopping those that were), NetworkError for a port in
  // use. Call once, from the main thread, with no other threads running.
  int run();

  // The failure report of the last run() that ended with one (format_failure_report), empty
  // otherwise. run() writes it to stderr unless plan.print_failure_report is false.
  const std::string& failure_report() const;

 private:
  class Impl;
  std::unique_ptr<Os> real_os_;  // when no Os was given
  std::unique_ptr<Impl> impl_;
};

// What --dry_run prints: the job's shape, the workers' Python and the PyTorch it was taken to
// import (and where it was read); for each worker, of the environment it would get
// (worker_environment(), as the spawn builds it), the torchrun contract and the plan's variables,
// and every other variable whose value differs from `environment`, the launcher's own (KEY=VALUE,
// one a line; <run dir> for the directory made at launch); then its command line. Defined in
// agent/worker_environment.cc.
std::string format_dry_run(const LaunchPlan& plan, int master_port,
                           const std::map<std::string, std::string>& environment);

}  // namespace acc::launcher
