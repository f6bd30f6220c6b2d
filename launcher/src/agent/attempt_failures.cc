#include "agent/attempt_failures.h"

#include <sys/wait.h>

#include <filesystem>

#include "agent/error_file.h"
#include "agent/worker_group.h"

namespace acc::launcher {
namespace {

WorkerOutcome exit_of(const Worker& worker) {
  WorkerOutcome outcome;
  outcome.exit_code = WIFEXITED(worker.status) ? WEXITSTATUS(worker.status) : 0;
  outcome.signal = WIFSIGNALED(worker.status) ? WTERMSIG(worker.status) : 0;
  return outcome;
}

}  // namespace

void AttemptFailures::attempt_started() {
  oom_before_ = read_oom_counters();  // a failure that moves them was the OOM killer
  oom_after_.reset();
}

std::string AttemptFailures::describe_root_cause(const WorkerGroup& group,
                                                 const std::string& sent_by) {
  const Worker& w = *group.root_cause();
  std::string line = "rank " + std::to_string(w.rank) + " exited with " + describe_exit(exit_of(w));
  const std::string cause = explain(w, sent_by);
  return cause.empty() ? line : line + ": " + cause;
}

JobEnd AttemptFailures::root_cause_end(const WorkerGroup& group, int node_rank,
                                       const std::string& sent_by) {
  const Worker& w = *group.root_cause();
  const WorkerOutcome outcome = exit_of(w);
  JobEnd end;
  end.node = node_rank;
  end.host = plan_.hostname;
  end.rank = w.rank;
  end.local_rank = w.spec.local_rank;
  end.pid = w.pid;
  end.exit_code = outcome.exit_code;
  end.signal = outcome.signal;
  end.status = failure_exit_status(outcome);
  end.reason = describe_root_cause(group, sent_by);
  return end;
}

WorkerOutcome AttemptFailures::remote_outcome(const JobEnd& end) {
  WorkerOutcome o;
  o.rank = end.rank;
  o.local_rank = end.local_rank;
  o.host = end.host;
  o.node = end.node;
  o.pid = end.pid;
  o.exit_code = end.exit_code;
  o.signal = end.signal;
  o.root_cause = true;
  return o;
}

AttemptFailures::Sdc AttemptFailures::sdc_of_root_cause(const WorkerGroup& group) const {
  return sdc_of(exit_of(*group.root_cause()));
}

AttemptFailures::Sdc AttemptFailures::sdc_of(const WorkerOutcome& outcome) const {
  if (outcome.signal != 0 || plan_.sdc_restart_exit_code == 0) return Sdc::kNone;
  if (outcome.exit_code == plan_.sdc_restart_exit_code) return Sdc::kRestart;
  if (outcome.exit_code == plan_.sdc_suspect_exit_code) return Sdc::kSuspect;
  return Sdc::kNone;
}

// Why `w` failed, in one line (failure_cause.h), after what its exit status says under
// --sdc_exit_codes; the OOM killer's counters are read once, when the first failure is seen.
std::string AttemptFailures::explain(const Worker& w, const std::string& sent_by) {
  if (!oom_after_) oom_after_ = read_oom_counters();
  FailureFacts facts;
  const WorkerOutcome outcome = exit_of(w);
  facts.exit_code = outcome.exit_code;
  facts.signal = outcome.signal;
  facts.peak_rss_kib = w.peak_rss_kib;
  facts.stderr_tail.assign(w.stderr_tail.begin(), w.stderr_tail.end());
  if (auto error = read_error_file(w.dir + "/error.json")) facts.error_message = error->message;
  if (w.signalled_by_launcher) facts.sent_by = sent_by;
  facts.before = oom_before_;
  facts.after = *oom_after_;
  std::string sdc;
  if (const Sdc said = sdc_of(outcome); said == Sdc::kRestart)
    sdc =
        "silent data corruption suspected, a restart on the same nodes asked to tell a transient "
        "fault from a lasting one (--sdc_exit_codes)";
  else if (said == Sdc::kSuspect)
    sdc = "its result failed validation: silent data corruption on this node (--sdc_exit_codes)";
  const std::string cause = explain_failure(facts);
  if (sdc.empty()) return cause;
  return cause.empty() ? sdc : sdc + "; " + cause;
}

std::vector<WorkerOutcome> AttemptFailures::outcomes(const WorkerGroup& group,
                                                     const std::string& sent_by, bool logs_stay) {
  std::vector<WorkerOutcome> outcomes;
  for (const auto& w : group.workers()) {
    WorkerOutcome o = exit_of(*w);
    o.rank = w->rank;
    o.local_rank = w->spec.local_rank;
    o.host = plan_.hostname;
    o.pid = w->pid;
    o.time = w->exit_time_text();
    o.root_cause = w.get() == group.root_cause();
    o.stopped_by_launcher = !o.root_cause && w->signalled_by_launcher && w->failed();
    if (logs_stay) o.log_file = w->dir + "/stderr.log";
    if (o.root_cause) {
      o.cause = explain(*w, sent_by);
      o.stderr_tail.assign(w->stderr_tail.begin(), w->stderr_tail.end());
      if (auto error = read_error_file(w->dir + "/error.json")) {
        o.error_file = logs_stay ? w->dir + "/error.json" : "";
        o.error_message = error->message;
        o.traceback = error->traceback;
      }
    }
    if (!o.log_file.empty() && !std::filesystem::exists(o.log_file)) o.log_file.clear();
    outcomes.push_back(std::move(o));
  }
  return outcomes;
}

}  // namespace acc::launcher
