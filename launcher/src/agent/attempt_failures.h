#pragma once

// What the agent says about an attempt's failed workers: the root cause in one line (its exit
// and, from failure_cause.h, why), the job's end it publishes to the other nodes, and the rows of
// the failure report. The OOM killer's counters are read at the attempt's start and once more
// at its first failure, so that a failure that moved them is named as the OOM killer's.

#include <optional>
#include <string>
#include <vector>

#include "acc/launcher/agent/failure_report.h"
#include "acc/launcher/nodes/membership.h"
#include "acc/launcher/plan/plan.h"
#include "agent/failure_cause.h"

namespace acc::launcher {

class WorkerGroup;
struct Worker;

class AttemptFailures {
 public:
  explicit AttemptFailures(const LaunchPlan& plan) : plan_(plan) {}

  // Before the attempt's workers start (reads the OOM counters).
  void attempt_started();
  // "rank 1 exited with 1: <why>" for the group's root cause, which must be set. `sent_by` names
  // who signalled a worker the launcher signalled ("the launcher: its workers stopped ...").
  std::string describe_root_cause(const WorkerGroup& group, const std::string& sent_by);
  // The job's end for the group's root cause on node `node_rank`.
  JobEnd root_cause_end(const WorkerGroup& group, int node_rank, const std::string& sent_by);
  // A row per worker of the group for the failure report; `logs_stay` when the run directory
  // outlives the job, so that its files may be named.
  std::vector<WorkerOutcome> outcomes(const WorkerGroup& group, const std::string& sent_by,
                                      bool logs_stay);
  // The row of another node's worker that ended the job.
  static WorkerOutcome remote_outcome(const JobEnd& end);

  // What the group's root cause (which must be set) said by its exit status under
  // --sdc_exit_codes: nothing, a restart on the same nodes, or a suspect node.
  enum class Sdc { kNone, kRestart, kSuspect };
  Sdc sdc_of_root_cause(const WorkerGroup& group) const;

 private:
  std::string explain(const Worker& w, const std::string& sent_by);
  Sdc sdc_of(const WorkerOutcome& outcome) const;

  const LaunchPlan& plan_;
  OomCounters oom_before_;                // at the attempt's start
  std::optional<OomCounters> oom_after_;  // at its first failure
};

}  // namespace acc::launcher
