#include "acc/launcher/agent/agent.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#include "acc/common/error.h"
#include "acc/common/exit_code.h"
#include "acc/common/int_ranges.h"
#include "acc/launcher/agent/failure_report.h"
#include "acc/launcher/nodes/membership.h"
#include "agent/error_file.h"
#include "agent/worker_group.h"
#include "observe/python_stack_hook.h"
#include "observe/stall_watch.h"
#include "output/console.h"
#include "output/log.h"
#include "process/real_os.h"

namespace acc::launcher {
namespace fs = std::filesystem;
using Clock = Os::Clock;

namespace {

// Handled besides --signals-to-handle: SIGUSR1 is forwarded (SLURM's pre-emption warning, a
// script's checkpoint trigger), SIGUSR2 asks for a stack report (`acc-launch stacks`).
constexpr int kAlwaysHandled[] = {SIGUSR1, SIGUSR2};

std::string make_run_dir(const LaunchPlan& plan) {
  fs::path base = plan.log_dir.empty() ? fs::temp_directory_path() : fs::path(plan.log_dir);
  std::error_code ec;
  fs::create_directories(base, ec);
  std::string pattern =
      (base / ((plan.log_dir.empty() ? "acc-launch-" : "") + plan.run_id + "_XXXXXX")).string();
  ACC_CHECK(::mkdtemp(pattern.data()) != nullptr, SystemError, "cannot create a log directory in ",
            base.string(), ": ", std::strerror(errno));
  return pattern;
}

WorkerOutcome exit_of(const Worker& worker) {
  WorkerOutcome outcome;
  outcome.exit_code = WIFEXITED(worker.status) ? WEXITSTATUS(worker.status) : 0;
  outcome.signal = WIFSIGNALED(worker.status) ? WTERMSIG(worker.status) : 0;
  return outcome;
}

}  // namespace

// Runs attempts: joins the membership for each, runs one WorkerGroup to its end, and decides
// what comes next (the end, a restart, meeting again); forwards signals and watches for hangs.
class Agent::Impl : public WorkerGroup::Listener {
 public:
  Impl(LaunchPlan plan, std::map<std::string, std::string> environment, const std::string& hostname,
       Os& os)
      : plan_(std::move(plan)),
        environment_(std::move(environment)),
        os_(os),
        membership_(make_membership(plan_, hostname)) {}

  int run() {
    std::vector<int> taken(std::begin(kAlwaysHandled), std::end(kAlwaysHandled));
    taken.insert(taken.end(), plan_.stop_signals.begin(), plan_.stop_signals.end());
    os_.take_signals(taken);
    membership_->set_stop_check([this] { return arrived_stop_signal(); });
    run_dir_ = make_run_dir(plan_);
    python_hook_dir_ = install_python_stack_hook(run_dir_);
    int restart_count = 0;
    for (int attempt = 0;; ++attempt) {
      try {
        run_attempt(attempt, membership_->join(restart_count));
      } catch (...) {
        if (group_ && group_->keeps_logs()) keep_run_dir_ = true;
        finish_run_dir();
        throw;
      }
      if (!group_->unkillable().empty()) return finish(report_unkillable());
      if (interrupted_by_) {
        notice(std::string("stopped by ") + sigabbrev_np(interrupted_by_) +
               ", forwarded to the workers");
        return finish(128 + interrupted_by_);
      }
      if (stalled_) return finish(kExitTimeout);
      if (membership_changed_) {
        notice("nodes joined or left the job; meeting again (no restart used)");
        continue;
      }
      if (!group_->root_cause()) return finish(0);
      if (restart_count < plan_.max_restarts) {
        ++restart_count;
        notice("worker group failed (" + describe_root_cause() + "); restarting (" +
               std::to_string(restart_count) + " of " + std::to_string(plan_.max_restarts) + ")");
        continue;
      }
      std::vector<WorkerOutcome> outcomes = collect_outcomes();
      failure_report_ = format_failure_report(plan_.program, attempt + 1, outcomes);
      if (plan_.print_failure_report) write_all(STDERR_FILENO, failure_report_);
      return finish(failure_exit_status(*std::find_if(
          outcomes.begin(), outcomes.end(), [](const WorkerOutcome& o) { return o.root_cause; })));
    }
  }

  const std::string& failure_report() const { return failure_report_; }

  // --- WorkerGroup::Listener -----------------------------------------------------------------

  void on_signal(int sig) override {
    if (!stops_the_job(sig) && sig == SIGUSR2) {
      report_on_demand();
    } else if (!stops_the_job(sig)) {
      group_->signal_all(sig);
    } else if (group_->stopping()) {
      group_->kill();  // asked twice: stop waiting
    } else {
      interrupted_by_ = sig;
      group_->stop(sig);
    }
  }

  void on_progress(int index) override {
    if (stall_watch_) stall_watch_->progress(index);
  }

  // The one place the agent prints a notice.
  void notice(const std::string& message) override { log::info(message); }

 private:
  int finish(int status) {
    membership_->leave(status == 0);
    finish_run_dir();
    return status;
  }

  // While no worker runs (a rendezvous, a barrier): the stop signal that has arrived, 0 if none.
  int arrived_stop_signal() {
    std::vector<pollfd> none;
    for (int sig : os_.wait(none, os_.now()))
      if (stops_the_job(sig)) return sig;
    return 0;
  }

  bool stops_the_job(int sig) const {
    return std::find(plan_.stop_signals.begin(), plan_.stop_signals.end(), sig) !=
           plan_.stop_signals.end();
  }

  // --- one attempt -------------------------------------------------------------------------

  void run_attempt(int attempt, const Round& round) {
    membership_changed_ = false;
    stalled_ = false;
    stall_watch_.reset();
    group_.reset();
    round_ = round;
    group_ = std::make_unique<WorkerGroup>(os_, plan_, round_, environment_,
                                           run_dir_ + "/attempt_" + std::to_string(attempt),
                                           python_hook_dir_, *this);
    next_membership_check_ = os_.now() + membership_->poll_interval();
    group_->start();
    if (group_->keeps_logs()) keep_run_dir_ = true;
    if (attempt == 0)
      for (const std::string& message : plan_.notices) notice(message);
    start_stall_watch();
    while (group_->running()) {
      group_->wait_once(next_wake());
      if (!group_->stopping()) look_around();
    }
    stall_watch_.reset();
    group_->finish();
    ACC_CHECK(membership_error_.empty(), NetworkError,
              "lost the job's rendezvous: ", membership_error_);
  }

  // The next membership check or stall-watch tick; the group adds its own deadlines.
  std::optional<Clock::time_point> next_wake() const {
    std::optional<Clock::time_point> wake;
    if (group_->stopping()) return wake;
    if (membership_->poll_interval().count() > 0) wake = next_membership_check_;
    if (stall_watch_ && stall_watch_->next_wake() != Clock::time_point::max())
      wake = std::min(wake.value_or(Clock::time_point::max()), stall_watch_->next_wake());
    return wake;
  }

  // While the workers run: the stall watch, and whether the nodes of the job changed.
  void look_around() {
    if (stall_watch_ && stall_watch_->tick()) on_stall();
    if (group_->stopping() || membership_->poll_interval().count() == 0 ||
        os_.now() < next_membership_check_)
      return;
    next_membership_check_ = os_.now() + membership_->poll_interval();
    try {
      if (membership_->changed()) {
        membership_changed_ = true;
        group_->stop(SIGTERM);
      }
    } catch (const Error& e) {
      // The job's store is gone (its node died) or broke: this node cannot go on.
      membership_error_ = e.what();
      group_->stop(SIGTERM);
    }
  }

  // --- hangs (stall_watch.h) -------------------------------------------------------------------

  void start_stall_watch() {
    std::vector<StallWatch::Worker> watched;
    for (const auto& w : group_->workers())
      watched.push_back({w->rank, w->spec.local_rank, w->pid, w->dir});
    stall_watch_ =
        std::make_unique<StallWatch>(plan_, round_, std::move(watched), plan_.stall_timeout);
  }

  void on_stall() {
    const std::string report = stall_watch_->report(group_->running_workers(), true);
    keep_run_dir_ = true;
    const std::string path = run_dir_ + "/hang_report.txt";
    append_report(path, report);
    write_all(STDERR_FILENO, report);
    if (!plan_.stall_stops_job) {
      notice("hang report in " + path + "; the job goes on (--stall_action report)");
      return;
    }
    notice("hang report in " + path + "; stopping the workers (--stall_timeout)");
    stalled_ = true;
    group_->stop(SIGTERM);
  }

  // SIGUSR2, from `acc-launch stacks`: the report to stderr and to the file that command reads.
  void report_on_demand() {
    const std::string report = stall_watch_ ? stall_watch_->report(group_->running_workers(), false)
                                            : "acc-launch: no workers are running right now\n";
    write_all(STDERR_FILENO, report);
    publish_on_demand_report(report);
  }

  // --- reporting -----------------------------------------------------------------------------

  // One line for each worker SIGKILL did not end: it sleeps in the kernel, and so will the next
  // attempt's on this host, so there is none.
  int report_unkillable() {
    for (const Worker* w : group_->unkillable()) {
      const Os::ProcessState state = os_.process_state(w->pid);
      std::string line = "acc-launch: rank " + std::to_string(w->rank) + " pid " +
                         std::to_string(w->pid) + " is in " + std::string(1, state.state) +
                         " state";
      if (!state.wchan.empty()) line += " (wchan " + state.wchan + ")";
      line += " and cannot be killed; this host may need recycling\n";
      write_all(STDERR_FILENO, line);
    }
    return kExitUnkillable;
  }

  std::string describe_root_cause() const {
    return "rank " + std::to_string(group_->root_cause()->rank) + " exited with " +
           describe_exit(exit_of(*group_->root_cause()));
  }

  std::vector<WorkerOutcome> collect_outcomes() const {
    std::vector<WorkerOutcome> outcomes;
    for (const auto& w : group_->workers()) {
      WorkerOutcome o = exit_of(*w);
      o.rank = w->rank;
      o.local_rank = w->spec.local_rank;
      o.host = plan_.hostname;
      o.pid = w->pid;
      o.time = w->exit_time;
      o.root_cause = w.get() == group_->root_cause();
      o.stopped_by_launcher = !o.root_cause && w->signalled_by_launcher && w->failed();
      if (keep_run_dir_ || !plan_.log_dir.empty()) o.log_file = w->dir + "/stderr.log";
      if (o.root_cause) {
        o.stderr_tail.assign(w->stderr_tail.begin(), w->stderr_tail.end());
        if (auto error = read_error_file(w->dir + "/error.json")) {
          o.error_file = (plan_.log_dir.empty() && !keep_run_dir_) ? "" : w->dir + "/error.json";
          o.error_message = error->message;
          o.traceback = error->traceback;
        }
      }
      if (!o.log_file.empty() && !fs::exists(o.log_file)) o.log_file.clear();
      outcomes.push_back(std::move(o));
    }
    return outcomes;
  }

  void finish_run_dir() {
    std::error_code ec;
    if (keep_run_dir_ || !plan_.log_dir.empty()) {
      notice("logs in " + run_dir_);
    } else {
      fs::remove_all(run_dir_, ec);
    }
  }

  LaunchPlan plan_;
  std::map<std::string, std::string> environment_;
  Os& os_;
  std::unique_ptr<Membership> membership_;
  Round round_;
  bool membership_changed_ = false;
  std::string membership_error_;
  Clock::time_point next_membership_check_;
  std::string run_dir_;
  bool keep_run_dir_ = false;
  std::string python_hook_dir_;
  std::unique_ptr<WorkerGroup> group_;
  int interrupted_by_ = 0;
  std::unique_ptr<StallWatch> stall_watch_;
  bool stalled_ = false;
  std::string failure_report_;
};

Agent::Agent(LaunchPlan plan, std::map<std::string, std::string> environment,
             const std::string& hostname)
    : real_os_(std::make_unique<RealOs>()),
      impl_(std::make_unique<Impl>(std::move(plan), std::move(environment), hostname, *real_os_)) {}

Agent::Agent(LaunchPlan plan, std::map<std::string, std::string> environment,
             const std::string& hostname, Os& os)
    : impl_(std::make_unique<Impl>(std::move(plan), std::move(environment), hostname, os)) {}
Agent::~Agent() = default;
int Agent::run() {
  return impl_->run();
}
const std::string& Agent::failure_report() const {
  return impl_->failure_report();
}

std::string format_dry_run(const LaunchPlan& plan, int master_port,
                           const std::map<std::string, std::string>& environment) {
  std::ostringstream out;
  out << "# acc-launch dry run: " << plan.nnodes << " node(s) x " << plan.nproc_per_node
      << " worker(s), world size " << plan.world_size << ", node rank " << plan.node_rank
      << ", store " << plan.master_addr << ":" << master_port << "\n";
  const Round round = static_round(plan, master_port, 0);
  for (const WorkerSpec& worker : plan.workers) {
    out << "\n# rank " << global_rank(plan, round, worker.local_rank) << " (local rank "
        << worker.local_rank << ")\n";
    if (worker.local_rank < static_cast<int>(plan.worker_cpus.size())) {
      const std::vector<int>& cpus = plan.worker_cpus[worker.local_rank];
      out << "# cpus " << format_int_ranges(cpus) << " (OMP_NUM_THREADS=" << cpus.size()
          << " unless set)\n";
    }
    for (const auto& [key, value] : worker_env(plan, worker, round, "<log dir>/error.json"))
      out << key << "=" << value << "\n";
    for (const auto& [key, value] : plan.env_defaults)
      if (!environment.count(key)) out << key << "=" << value << "\n";
    out << "command:";
    for (const std::string& arg : worker.argv) out << " " << quote_for_shell(arg);
    out << "\n";
  }
  return out.str();
}

}  // namespace acc::launcher
