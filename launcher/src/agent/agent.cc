#include "acc/launcher/agent/agent.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "acc/common/error.h"
#include "acc/common/exit_code.h"
#include "acc/common/int_ranges.h"
#include "acc/common/strings.h"
#include "acc/launcher/agent/failure_report.h"
#include "acc/launcher/nodes/membership.h"
#include "agent/attempt_failures.h"
#include "agent/checkpoint_memory.h"
#include "agent/checkpoint_replica.h"
#include "agent/error_file.h"
#include "agent/gpu_checks.h"
#include "agent/node_verdicts.h"
#include "agent/recoveries.h"
#include "agent/run_dir.h"
#include "agent/standbys.h"
#include "agent/status_servers.h"
#include "agent/timer_requests.h"
#include "agent/worker_group.h"
#include "hangs/file_timer.h"
#include "hangs/python_stack_hook.h"
#include "hangs/stall_watch.h"
#include "nodes/job_link.h"
#include "nodes/network_probe.h"
#include "nodes/preflight.h"
#include "output/console.h"
#include "output/log.h"
#include "output/timeline.h"
#include "process/real_os.h"
#include "status/job_status.h"

namespace acc::launcher {
using Clock = Os::Clock;

namespace {

// Handled besides --signals-to-handle: SIGUSR1 is forwarded (SLURM's pre-emption warning, a
// script's checkpoint trigger), SIGUSR2 asks for a stack report (`acc-launch stacks`).
constexpr int kAlwaysHandled[] = {SIGUSR1, SIGUSR2};

// How long a node other than 0 whose workers stalled leaves them for node 0 to report the job's
// hang: node 0's own stall watch (its ranks wait in the collective that stalled), the traces of
// every node (at most 2 s) and the stacks (at most 5 s).
constexpr std::chrono::milliseconds kNodeZeroReportWait{10'000};

// How long into an attempt the launcher looks which ranks have not arrived in
// init_process_group (at most half of --stall_init_timeout).
constexpr std::chrono::milliseconds kStartUpLook{30'000};

// At the job's end, how long the launcher waits for the newest checkpoint saved in memory to be
// written to storage (checkpoint_memory.h).
constexpr std::chrono::milliseconds kCheckpointWriteLimit{300'000};

// How often the newest checkpoint in memory is written to storage while saves come:
// $ACC_CHECKPOINT_WRITE_INTERVAL seconds (0: only when an attempt fails and at the end),
// default 60.
std::chrono::milliseconds checkpoint_persist_interval(
    const std::map<std::string, std::string>& environment) {
  const auto set = environment.find("ACC_CHECKPOINT_WRITE_INTERVAL");
  double seconds = 60;
  if (set != environment.end()) {
    char* end = nullptr;
    const double value = std::strtod(set->second.c_str(), &end);
    if (end != set->second.c_str() && *end == '\0' && value >= 0) seconds = value;
  }
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

// The date as torchelastic's timer and health check give theirs: seconds since the epoch. The
// health check's server thread reads the machine's clock, which any thread may read (the Os is
// the agent thread's).
double wall_seconds(const rendezvous::Clock& clock = rendezvous::Clock::steady()) {
  return std::chrono::duration<double>(clock.wall_now().time_since_epoch()).count();
}

}  // namespace

// The attempt loop: joins the membership for each attempt, runs one WorkerGroup to its end, and
// decides what comes next (the end, a restart, meeting again); forwards signals and watches for
// hangs. Its parts: the run directory (run_dir.h), the GPU checks (gpu_checks.h), the
// recoveries and goodput (recoveries.h), the failed workers' descriptions (attempt_failures.h),
// the health check and status servers (status_servers.h), torchelastic's timer (timer_requests.h).
class Agent::Impl : public WorkerGroup::Listener {
 public:
  Impl(LaunchPlan plan, std::map<std::string, std::string> environment, const std::string& hostname,
       Os& os)
      : Impl(std::move(plan), std::move(environment), os, nullptr) {
    membership_ = make_membership(plan_, hostname);
  }
  Impl(LaunchPlan plan, std::map<std::string, std::string> environment, Os& os,
       std::unique_ptr<Membership> membership)
      : plan_(std::move(plan)),
        environment_(std::move(environment)),
        os_(os),
        membership_(std::move(membership)),
        gpu_checks_(plan_, os_),
        no_progress_(plan_.max_no_progress_restarts),
        failures_(plan_),
        status_([] { return wall_seconds(); }) {}

  int run() {
    set_up();
    for (int attempt = 0;; ++attempt)
      if (const std::optional<int> status = run_attempt_and_decide(attempt)) {
        standbys_.reset();
        return *status;
      }
  }

  const std::string& failure_report() const { return failure_report_; }

  // --- WorkerGroup::Listener -----------------------------------------------------------------

  void on_signal(int sig) override {
    if (sig == SIGWINCH) {
      group_->resize_terminals();
    } else if (!stops_the_job(sig) && sig == SIGUSR2) {
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

  // The file timer's pipe has requests.
  void on_readable(int fd) override {
    if (file_timer_ && fd == file_timer_->fd()) file_timer_->read_requests();
    if (fd == membership_fd_ && membership_->take_event()) next_membership_check_ = os_.now();
    if (standbys_ && std::ranges::count(standbys_->channels(), fd) > 0) {
      // The channel may have ended, or been replaced by an heir's (maybe under the same number).
      standbys_->read_news(fd);
      group_->unwatch(fd);
      watch_standbys();
      show_warm_workers();
    }
  }

  // The one place the agent prints a notice.
  void notice(const std::string& message) override { log::info(message); }

 private:
  // Before the first attempt: the signals, the GPU check and the servers (before any rendezvous),
  // the pre-flight, the run directory.
  void set_up() {
    std::vector<int> taken(std::begin(kAlwaysHandled), std::end(kAlwaysHandled));
    taken.insert(taken.end(), plan_.stop_signals.begin(), plan_.stop_signals.end());
    // Workers whose output reads a terminal of its own take the launcher's terminal's new size.
    if (os_.terminal_size(STDOUT_FILENO) || os_.terminal_size(STDERR_FILENO))
      taken.push_back(SIGWINCH);
    os_.take_signals(taken);
    gpu_checks_.start_health_check();  // after take_signals: its thread must not take a stop signal
    status_.start(plan_, environment_, [this](const std::string& m) { notice(m); });
    membership_->set_stop_check([this] { return arrived_stop_signal(); });
    run_preflight(plan_, [this] { return arrived_stop_signal(); });
    unfit_gpus_ = gpu_checks_.health_check_refusal();
    run_dir_.emplace(plan_, os_.proc());
    if (!plan_.no_python_hook) python_hook_dir_ = install_python_stack_hook(run_dir_->path());
    set_up_checkpoints();
    if (Standbys::wanted(plan_) && os_.can_keep_standbys()) {
      if (const std::string no = Standbys::memory_refusal(plan_, os_.proc()); !no.empty())
        notice("warm workers off: " + no);
      else
        standbys_.emplace(os_, plan_, environment_, run_dir_->path(), python_hook_dir_);
    }
    timeline::mark("run dir");
    file_timer_ = start_file_timer(plan_, environment_, run_dir_->path());
  }

  // The memory acc_launch.checkpoint and libacc's save_state save into (checkpoint_memory.h).
  void set_up_checkpoints() {
    if (!wants_checkpoint_memory(plan_)) return;
    std::string dir;
    try {
      dir = run_dir_->make_memory_dir("checkpoints", os_.proc());
    } catch (const SystemError& e) {
      notice(std::string("checkpoint: no memory for checkpoints (saves go to storage): ") +
             e.what());
      return;
    }
    const auto pythonpath = environment_.find("PYTHONPATH");
    const bool python_hook = !plan_.no_python_hook && !plan_.python.empty();
    checkpoints_.emplace(
        os_, dir, python_hook ? plan_.workers.front().argv.front() : "",
        python_hook_dir_ + (pythonpath == environment_.end() ? "" : ":" + pythonpath->second),
        checkpoint_persist_interval(environment_), plan_.keep_checkpoints,
        [this](const std::string& m) { notice(m); });
    environment_[CheckpointMemory::kEnvVar] = dir;
  }

  // --checkpoint_replica: before the workers start, where the round has other nodes.
  void replica_attempt_starts() {
    if (!plan_.checkpoint_replica || !checkpoints_) return;
    const RoundStore round = membership_->round_store();
    if (round.store == nullptr) return;
    if (!replica_)
      replica_.emplace(os_, checkpoints_->dir(), round.address, plan_.job_secret,
                       [this](const std::string& m) { notice(m); });
    std::vector<int> ranks;
    for (const auto& worker : plan_.workers)
      ranks.push_back(global_rank(plan_, round_, worker.local_rank));
    replica_->attempt_starts(round, ranks);
  }

  // Every standby's channel in the worker group's wait, once.
  void watch_standbys() {
    for (int fd : standbys_->channels()) {
      group_->unwatch(fd);
      group_->watch(fd);
    }
  }

  // The standbys on the status page and /metrics.
  void show_warm_workers() {
    if (status_.board()) status_.board()->set_warm_workers(standbys_->status());
  }

  // An operator's verdict on this node before it meets the others (node_verdicts.h): the exit
  // status where it keeps this node out of the job, none where the node takes part.
  std::optional<int> left_out() {
    if (!suspect_.empty()) return stay_out(suspect_);
    if (plan_.exclude_nodes_file.empty() && plan_.node_health_command.empty()) return std::nullopt;
    const std::string why =
        node_verdict(os_, plan_, names_of_this_node(plan_, environment_), run_dir_->path());
    if (why.empty()) return std::nullopt;
    return stay_out(why);
  }

  // Keeps this node out of the job, `why` in one line: the exit status.
  int stay_out(const std::string& why) {
    log::error("this node takes no part in the job: " + why + "; exit " +
               std::to_string(plan_.no_restart_exit_code) + " (--no_restart_exit_code)");
    finish_run_dir();
    return plan_.no_restart_exit_code;
  }

  // --network_check on the first round (nodes/network_check.h): the exit status where this node
  // stays out; none where it goes on, in `round`, which is met again without the faulty nodes
  // where they stay out. Throws NetworkError where the job cannot go on without them.
  std::optional<int> check_network(Round& round) {
    if (!plan_.network_check || network_checked_) return std::nullopt;
    network_checked_ = true;
    const RoundStore store = membership_->round_store();
    if (!store.store) {
      log::info("--network_check: a job of one node has no other node to check");
      return std::nullopt;
    }
    const NetworkOutcome outcome = run_network_check(store, plan_, os_, [this] {
      if (const int sig = arrived_stop_signal())
        throw InterruptedError(
            sig, std::string("stopped by ") + sigabbrev_np(sig) + " during the network check");
    });
    const NetworkDecision& decision = outcome.decision;
    if (decision.why.empty()) return std::nullopt;
    if (outcome.this_node_faulty) return stay_out(decision.why);
    ACC_CHECK(!decision.job_ends, NetworkError, decision.why);
    notice(decision.why + "; meeting again without it");
    round = membership_->join(restart_count_);
    return std::nullopt;
  }

  // One attempt and what follows it: the status to exit with, or none for another attempt.
  std::optional<int> run_attempt_and_decide(int attempt) {
    JobEvent next;
    try {
      if (attempt > 0) await_gpu_release();
      group_.reset();
      job_event_ = {};
      if (const std::optional<int> status = left_out()) return status;
      try {
        Round round = membership_->join(restart_count_);
        if (const std::optional<int> status = check_network(round)) return status;
        timeline::mark("joined");
        if (recoveries_.recovering()) recoveries_.joined(os_.now());
        if (!unfit_gpus_.empty()) return refuse_unfit_gpus(round);
        run_attempt(attempt, round);
      } catch (const JobEndedError& e) {
        next.kind = JobEvent::Kind::kEnded;
        next.end = e.end();
        next.shared = true;
        return report_end(attempt, next);
      }
      if (const std::optional<int> status = ended_here()) return status;
      if (membership_changed_) {
        notice("nodes joined or left the job; meeting again (--max_restarts not used)");
        recoveries_.begin(meet_again_why_.empty() ? "nodes joined or left the job"
                                                  : meet_again_why_);
        return std::nullopt;
      }
      next = job_event_;
      // Every worker here succeeded: so must every other node's, or the job goes on.
      if (next.kind == JobEvent::Kind::kNone) next = membership_->await_exit(restart_count_);
    } catch (const NotNeeded& e) {
      notice(e.what());
      finish_run_dir();
      return 0;
    } catch (...) {
      if (group_ && group_->keeps_logs()) run_dir_->keep();
      finish_run_dir();
      throw;
    }
    if (next.kind == JobEvent::Kind::kNone) return finish(0);
    if (next.kind != JobEvent::Kind::kRestart) return report_end(attempt, next);
    restart_count_ = next.restart_count;
    if (checkpoints_) checkpoints_->persist();  // in the background: the restart does not wait
    if (!suspect_.empty()) {  // the next round goes on without this node: its failure report
      if (plan_.print_failure_report)
        write_all(STDERR_FILENO,
                  format_failure_report(plan_.program, attempt + 1,
                                        failures_.outcomes(*group_, sent_by(), run_dir_->stays())));
      return std::nullopt;
    }
    no_progress_.count(attempt_made_progress());
    notice(next.why + "; restarting (" + std::to_string(counted_restarts()) + " of " +
           std::to_string(plan_.max_restarts) + no_progress_.describe() + ")");
    recoveries_.begin(next.why);
    return std::nullopt;
  }

  // This node ends the job after the attempt: a worker that cannot be killed, a stop signal, a
  // hang. None of these: nothing.
  std::optional<int> ended_here() {
    if (!group_->unkillable().empty())
      return end_job(launcher_exit(report_unkillable(), plan_.retryable_exit_code),
                     "a worker cannot be killed");
    if (interrupted_by_) {
      notice(std::string("stopped by ") + sigabbrev_np(interrupted_by_) +
             ", forwarded to the workers");
      return end_job(128 + interrupted_by_, std::string("its launcher was stopped by SIG") +
                                                sigabbrev_np(interrupted_by_));
    }
    if (stalled_)
      return end_job(launcher_exit(kExitTimeout, plan_.retryable_exit_code),
                     "its workers stopped making progress");
    return std::nullopt;
  }

  int finish(int status) {
    if (checkpoints_)
      checkpoints_->persist_and_wait(kCheckpointWriteLimit,
                                     [this](int sig) { return stops_the_job(sig); });
    if (recoveries_.any())
      for (const std::string& line : recoveries_.summary()) notice(line);
    if (status_.board()) status_.board()->job_ended();  // its workers are done; the exit barrier
    status_.job_ended(status);
    try {
      membership_->leave(status == 0);  // may be stopped by a signal at its exit barrier
    } catch (...) {
      finish_run_dir();
      throw;
    }
    os_.dismiss_watchdog();  // every worker is reaped: it ends while the run directory goes
    finish_run_dir();
    timeline::mark("cleaned");
    return status;
  }

  void finish_run_dir() {
    run_dir_->finish([this](const std::string& m) { notice(m); });
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

  // --- GPUs (gpu_checks.h) -------------------------------------------------------------------

  // The other nodes print "node N (host H) ended the job: " and this line, and exit 8 too.
  int refuse_unfit_gpus(const Round& round) {
    round_ = round;
    log::error(unfit_gpus_);
    JobEnd end;
    end.node = round_.node_rank;
    end.host = plan_.hostname;
    end.status = launcher_exit(kExitBadGpu, plan_.retryable_exit_code);
    end.reason = unfit_gpus_;
    membership_->end_job(end);
    return finish(end.status);
  }

  // Before the next attempt on a GPU node: the last one's workers must have let go of their GPU
  // memory. Throws InterruptedError for a stop signal meanwhile.
  void await_gpu_release() {
    if (!group_) return;
    std::vector<int> pids;
    for (const auto& w : group_->workers())
      if (w->pid > 0) pids.push_back(w->pid);
    gpu_checks_.await_release(
        pids, [this] { membership_->keep_alive(); },
        [this](int sig) { return stops_the_job(sig); });
  }

  // --- one attempt -------------------------------------------------------------------------

  void run_attempt(int attempt, const Round& round) {
    start_attempt(attempt, round);
    while (group_->running()) {
      group_->wait_once(next_wake());
      publish_failure();
      look_around();
    }
    timeline::mark("exited");
    end_attempt();
  }

  // The attempt's workers, spawned, and everything that watches them told so.
  void start_attempt(int attempt, const Round& round) {
    membership_changed_ = false;
    meet_again_why_.clear();
    stalled_ = false;
    stop_stalled_at_.reset();
    stall_watch_.reset();
    group_.reset();
    round_ = round;
    group_ = std::make_unique<WorkerGroup>(os_, plan_, round_, environment_,
                                           run_dir_->path() + "/attempt_" + std::to_string(attempt),
                                           python_hook_dir_, *this);
    if (file_timer_) group_->watch(file_timer_->fd());
    next_membership_check_ = os_.now() + membership_->poll_interval();
    failures_.attempt_started();
    replica_attempt_starts();
    group_->start(standbys_ ? &*standbys_ : nullptr);
    timeline::mark("started");
    if (standbys_) {
      standbys_->replenish(round_);
      watch_standbys();
      show_warm_workers();
    }
    // After the spawn, which must not wait for a connection: another node's failure, restart or
    // new round wakes this loop at once (membership.h, event_fd()).
    membership_fd_ = membership_->event_fd();
    if (membership_fd_ >= 0) group_->watch(membership_fd_);
    if (const std::optional<RecoveryStatus> r = recoveries_.attempt_started(attempt, os_.now())) {
      notice(Recoveries::describe(*r));
      if (status_.board()) {
        status_.board()->recovered(*r);
        status_.board()->set_goodput(recoveries_.goodput());
      }
    }
    status_.attempt_started(*group_, plan_, round_, restart_count_);
    if (group_->keeps_logs()) run_dir_->keep();
    if (attempt == 0)
      for (const std::string& message : plan_.notices) notice(message);
    start_stall_watch();
    start_up_look_at_ = os_.now() + start_up_look();
  }

  // How long into an attempt look_at_start_up() looks: at most half of --stall_init_timeout.
  std::chrono::milliseconds start_up_look() const {
    return std::min(kStartUpLook, plan_.stall_init_timeout / 2);
  }

  // A short while into an attempt, where this node sees the workers' store (node 0 of a static
  // job): the ranks that have not arrived in init_process_group, which the others wait for.
  void look_at_start_up() {
    const std::optional<std::vector<int>> arrived = membership_->ranks_in_store();
    if (!arrived || arrived->empty() || static_cast<int>(arrived->size()) >= plan_.world_size)
      return;
    std::vector<int> missing;
    for (int rank = 0; rank < plan_.world_size; ++rank)
      if (!std::binary_search(arrived->begin(), arrived->end(), rank)) missing.push_back(rank);
    auto ranks = [](const std::vector<int>& r, const char* one, const char* several) {
      return (r.size() == 1 ? "rank " : "ranks ") + format_int_ranges(r) +
             (r.size() == 1 ? one : several);
    };
    notice("attempt " + std::to_string(restart_count_) + ": after " +
           decimal_seconds(start_up_look()) + " s, " + ranks(missing, " has", " have") +
           " not arrived in init_process_group (no Gloo address in the store); " +
           ranks(*arrived, " waits", " wait") + " there for " +
           (missing.size() == 1 ? "it" : "them"));
  }

  // Its workers have all ended: the stragglers' summary, the attempt's time counted.
  void end_attempt() {
    const Clock::time_point ended = os_.now();
    if (stall_watch_) write_all(STDERR_FILENO, stall_watch_->straggler_summary());
    stall_watch_.reset();
    group_->finish();
    status_.attempt_ended();
    // Its wall time counts as progress when its workers made some.
    const GoodputStatus& goodput = recoveries_.attempt_ended(ended, attempt_made_progress());
    if (status_.board()) status_.board()->set_goodput(goodput);
    publish_failure();
    ACC_CHECK(membership_error_.empty(), NetworkError,
              "lost the job's rendezvous: ", membership_error_);
  }

  // The next membership check or stall-watch tick; the group adds its own deadlines.
  std::optional<Clock::time_point> next_wake() const {
    std::optional<Clock::time_point> wake;
    if (membership_->poll_interval().count() > 0) wake = next_membership_check_;
    if (group_->stopping()) return wake;
    if (stall_watch_ && stall_watch_->next_wake() != Clock::time_point::max())
      wake = std::min(wake.value_or(Clock::time_point::max()), stall_watch_->next_wake());
    if (stop_stalled_at_)
      wake = std::min(wake.value_or(Clock::time_point::max()), *stop_stalled_at_);
    if (start_up_look_at_)
      wake = std::min(wake.value_or(Clock::time_point::max()), *start_up_look_at_);
    if (const auto at = checkpoints_ ? checkpoints_->next_wake() : std::nullopt)
      wake = std::min(wake.value_or(Clock::time_point::max()), *at);
    if (const auto at = replica_ ? replica_->next_wake() : std::nullopt)
      wake = std::min(wake.value_or(Clock::time_point::max()), *at);
    if (auto at =
            file_timer_ ? next_timer_expiry(*file_timer_, os_, wall_seconds(os_)) : std::nullopt)
      wake = std::min(wake.value_or(Clock::time_point::max()), *at);
    return wake;
  }

  // While the workers run: the stall watch, and what the other nodes of the job did. While they
  // stop: only keeping this node alive in the job's eyes.
  void look_around() {
    if (status_.board()) status_.board()->workers_running(group_->running_workers());
    if (checkpoints_) checkpoints_->tick();
    if (replica_) replica_->tick();
    if (file_timer_) signal_expired_regions(*file_timer_, *group_, os_, wall_seconds(os_));
    if (stop_stalled_at_ && os_.now() >= *stop_stalled_at_ && !group_->stopping()) stop_stalled();
    if (start_up_look_at_ && os_.now() >= *start_up_look_at_ && !group_->stopping()) {
      start_up_look_at_.reset();
      look_at_start_up();
    }
    if (!group_->stopping() && !stop_stalled_at_ && stall_watch_ && stall_watch_->tick())
      on_stall();
    if (membership_->poll_interval().count() == 0 || os_.now() < next_membership_check_) return;
    next_membership_check_ = os_.now() + membership_->poll_interval();
    // While stopping, or once this attempt's end is decided (this node's own restart wakes its
    // own watch too): only keeping this node alive in the job's eyes.
    if (group_->stopping() || job_event_.kind != JobEvent::Kind::kNone) {
      membership_->keep_alive();
      return;
    }
    try {
      const JobEvent event = membership_->watch(restart_count_);
      if (event.kind == JobEvent::Kind::kNone) return;
      if (!recoveries_.saw_failure()) recoveries_.failure_seen(os_.now());
      if (event.kind == JobEvent::Kind::kMeetAgain) {
        membership_changed_ = true;
        meet_again_why_ = event.why;
      } else {
        job_event_ = event;
      }
      group_->stop(SIGTERM);
    } catch (const Error& e) {
      // The job's store is gone (its node died) or broke: this node cannot go on.
      membership_error_ = e.what();
      group_->stop(SIGTERM);
    }
  }

  // The moment a worker fails, before the others here are stopped: the other nodes learn that
  // the job restarts or ends, and stop theirs too.
  void publish_failure() {
    if (group_->root_cause() && !recoveries_.saw_failure()) recoveries_.failure_seen(os_.now());
    if (job_event_.kind != JobEvent::Kind::kNone || !group_->root_cause() || membership_changed_ ||
        interrupted_by_ || stalled_)
      return;
    if (publish_sdc_exit()) return;
    if (no_progress_.at_limit() && !attempt_made_progress()) {
      JobEnd end = failures_.root_cause_end(*group_, round_.node_rank, sent_by());
      end.status = plan_.no_restart_exit_code;
      end.reason = "no restart: " + std::to_string(no_progress_.in_a_row() + 1) +
                   " attempt(s) in a row failed before any progress, the last as " + end.reason +
                   " (--max_no_progress_restarts " +
                   std::to_string(plan_.max_no_progress_restarts) + "); exit " +
                   std::to_string(end.status) + " (--no_restart_exit_code)";
      job_event_ = membership_->end_job(end);
      no_restart_ = true;
      return;
    }
    if (counted_restarts() < plan_.max_restarts) {
      job_event_ = membership_->restart_job(restart_count_);
      if (job_event_.kind == JobEvent::Kind::kRestart)
        job_event_.why =
            "worker group failed (" + failures_.describe_root_cause(*group_, sent_by()) + ")";
    } else {
      job_event_ =
          membership_->end_job(failures_.root_cause_end(*group_, round_.node_rank, sent_by()));
    }
  }

  // The restarts --max_restarts counts: not the RESTART code's of --sdc_exit_codes.
  int counted_restarts() {
    if (plan_.sdc_restart_exit_code == 0) return restart_count_;
    return restart_count_ - membership_->restarts_not_counted();
  }

  // The root cause exited with a code of --sdc_exit_codes: RESTART restarts the job on the same
  // nodes, not counted (unless the attempt before was such a restart); SUSPECT makes this node
  // leave an elastic job (the next round takes a spare, or runs with a node fewer) and ends a
  // static one with --no_restart_exit_code. Whether it decided.
  bool publish_sdc_exit() {
    const AttemptFailures::Sdc sdc = failures_.sdc_of_root_cause(*group_);
    const bool restart =
        sdc == AttemptFailures::Sdc::kRestart && restart_count_ != attempt_after_sdc_restart_;
    if (sdc == AttemptFailures::Sdc::kNone) return false;
    if (status_.board()) status_.board()->sdc_exit(sdc == AttemptFailures::Sdc::kSuspect);
    const std::string cause = failures_.describe_root_cause(*group_, sent_by());
    if (restart) {
      attempt_after_sdc_restart_ = restart_count_ + 1;
      job_event_ = membership_->restart_job_not_counted(restart_count_);
      job_event_.why = "worker group failed (" + cause +
                       "); a restart on the same nodes, which --max_restarts does not count";
      return true;
    }
    if (sdc != AttemptFailures::Sdc::kSuspect) return false;  // a RESTART twice in a row counts
    const bool elastic = plan_.rdzv_backend != "static";
    if (elastic && !membership_->serves_rendezvous()) {
      suspect_ = cause;
      job_event_ = membership_->restart_job_not_counted(restart_count_);
      return true;
    }
    JobEnd end = failures_.root_cause_end(*group_, round_.node_rank, sent_by());
    end.status = plan_.no_restart_exit_code;
    end.reason = "no restart: " + end.reason + "; the job cannot go on without this node (" +
                 (elastic ? "it serves the rendezvous store" : "a static job") + "); exit " +
                 std::to_string(end.status) + " (--no_restart_exit_code)";
    job_event_ = membership_->end_job(end);
    no_restart_ = true;
    return true;
  }

  // Who signalled a worker that the launcher signalled, for the failure's cause.
  std::string sent_by() const {
    return stalled_          ? "the launcher: its workers stopped making progress"
           : interrupted_by_ ? std::string("the launcher, passing on the SIG") +
                                   sigabbrev_np(interrupted_by_) + " it was sent"
                             : "the launcher";
  }

  bool attempt_made_progress() const { return group_ && made_progress(*group_); }

  // --- the job's end -------------------------------------------------------------------------

  // This node ends the job (a stop signal, a hang, a worker that cannot be killed).
  int end_job(int status, const std::string& reason) {
    JobEnd end;
    end.node = round_.node_rank;
    end.host = plan_.hostname;
    end.status = status;
    end.reason = reason;
    const JobEvent event = membership_->end_job(end);
    if (event.shared) log::error(describe_job_end(event.end));
    return finish(status);
  }

  // The job ended (here or on another node): the failure report where a worker failed here, and
  // on node 0 also for another node's worker, then the line naming the node that ended it.
  int report_end(int attempt, const JobEvent& event) {
    const JobEnd& end = event.end;
    const bool here = !event.shared || end.node == round_.node_rank;
    const Worker* root = group_ ? group_->root_cause() : nullptr;
    if (root || (group_ && round_.node_rank == 0 && end.rank >= 0)) {
      std::vector<WorkerOutcome> outcomes =
          failures_.outcomes(*group_, sent_by(), run_dir_->stays());
      if (!here || !root) {
        for (WorkerOutcome& o : outcomes) o.root_cause = false;
        if (end.rank >= 0) outcomes.push_back(AttemptFailures::remote_outcome(end));
      }
      if (here && root) pass_on_error_file_of(*root, outcomes);
      failure_report_ = format_failure_report(plan_.program, attempt + 1, outcomes);
      if (plan_.print_failure_report) write_all(STDERR_FILENO, failure_report_);
    }
    // A job of several nodes: every node prints the line that names the node that ended it.
    if (event.shared) {
      log::error(describe_job_end(end));
    } else if (no_restart_) {
      log::error(end.reason);
    }
    // A worker's status passes through; the launchers' own (a lost node, a hang elsewhere) may be
    // made retryable.
    return finish(end.rank >= 0 ? end.status
                                : launcher_exit(end.status, plan_.retryable_exit_code));
  }

  // Where the launcher itself has $TORCHELASTIC_ERROR_FILE (TorchX, another torchelastic agent),
  // the root cause's error file goes there, as torchrun passes it on.
  void pass_on_error_file_of(const Worker& root, const std::vector<WorkerOutcome>& outcomes) {
    const auto to = environment_.find("TORCHELASTIC_ERROR_FILE");
    if (to == environment_.end() || to->second.empty()) return;
    for (const WorkerOutcome& o : outcomes)
      if (o.root_cause)
        pass_on_error_file(root.dir + "/error.json", to->second,
                           o.signal ? -o.signal : o.exit_code);
  }

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

  // --- hangs (stall_watch.h) -------------------------------------------------------------------

  void start_stall_watch() {
    std::vector<StallWatch::Worker> watched;
    for (const auto& w : group_->workers())
      watched.push_back({w->rank, w->spec.local_rank, w->pid, w->dir});
    stall_watch_ = std::make_unique<StallWatch>(
        plan_, round_, std::move(watched), plan_.stall_timeout,
        [this](const std::string& m) { notice(m); }, os_);
  }

  void on_stall() {
    membership_->keep_alive();  // collecting stacks takes seconds without a beat
    const std::string report = stall_watch_->report(group_->running_workers(), true);
    run_dir_->keep();
    const std::string path = run_dir_->path() + "/hang_report.txt";
    append_report(path, report);
    write_all(STDERR_FILENO, report);
    if (status_.board()) status_.board()->stalled(report);
    if (!plan_.stall_stops_job) {
      hang_notice("hang report in " + path + "; the job goes on (--stall_action report)");
      return;
    }
    if (round_.node_rank != 0 && round_.nnodes > 1) {
      // Node 0 reports the job's hang, with the traces this node has just put in its store, and
      // ends the job. Stopping the workers here first would break node 0's ranks' collectives
      // and turn its report into a worker failure: they stay until node 0 ends the job, or for
      // the time node 0's report takes at most (its own stall watch, the traces, the stacks).
      hang_notice("hang report in " + path +
                  "; node 0 reports the job's hang (this node stops its workers in " +
                  std::to_string(kNodeZeroReportWait.count() / 1000) + " s otherwise)");
      stop_stalled_at_ = os_.now() + kNodeZeroReportWait;
      return;
    }
    hang_notice("hang report in " + path + "; stopping the workers" +
                (plan_.stall_timeout.count() > 0 ? " (--stall_timeout)" : ""));
    stop_stalled();
  }

  // Where the hang report is: a notice, and under --quiet (which hides notices) a warning, so
  // that the path is said once either way.
  void hang_notice(const std::string& message) {
    if (log::enabled(log::Level::kInfo))
      notice(message);
    else
      log::warn(message);
  }

  void stop_stalled() {
    stop_stalled_at_.reset();
    stalled_ = true;
    group_->stop(SIGTERM);
  }

  // SIGUSR2, from `acc-launch stacks`: the report to stderr and to the file that command reads.
  void report_on_demand() {
    const std::string report = stall_watch_ ? stall_watch_->report(group_->running_workers(), false)
                                            : "acc-launch: no workers are running right now\n";
    write_all(STDERR_FILENO, report);
    publish_on_demand_report(report);
    if (status_.board() && stall_watch_) status_.board()->hang_report(report);
  }

  LaunchPlan plan_;
  std::map<std::string, std::string> environment_;
  Os& os_;
  std::unique_ptr<Membership> membership_;
  GpuChecks gpu_checks_;
  Round round_;
  int restart_count_ = 0;  // failure restarts so far: the job's, on a static multi-node job
  JobEvent job_event_;     // this attempt's: another node's restart or end, or this node's
  bool membership_changed_ = false;
  std::string meet_again_why_;  // the membership's reason, when it gave one
  std::string membership_error_;
  Clock::time_point next_membership_check_;
  int membership_fd_ = -1;  // membership_->event_fd() of the running attempt, or -1
  Recoveries recoveries_;
  NoProgressCount no_progress_;  // failed attempts in a row without progress on this node
  bool no_restart_ = false;      // --max_no_progress_restarts ended the job here
  // --sdc_exit_codes: why this node is suspect (it leaves the job), empty while it is not; and
  // the attempt (restart count) that this node's last RESTART restart began, whose own RESTART
  // is counted; -1: none.
  std::string suspect_;
  int attempt_after_sdc_restart_ = -1;
  AttemptFailures failures_;
  std::optional<RunDir> run_dir_;  // from set_up()
  std::string python_hook_dir_;
  std::unique_ptr<WorkerGroup> group_;
  std::optional<Standbys> standbys_;             // warm workers for the next attempt (standbys.h)
  std::optional<CheckpointMemory> checkpoints_;  // acc_launch.checkpoint's memory
  std::optional<CheckpointReplica> replica_;  // --checkpoint_replica, from the first round of nodes
  int interrupted_by_ = 0;
  std::unique_ptr<StallWatch> stall_watch_;
  bool stalled_ = false;
  // A node other than 0 whose workers stalled stops them at this time unless node 0 has ended
  // the job first (on_stall).
  std::optional<Clock::time_point> stop_stalled_at_;
  std::optional<Clock::time_point> start_up_look_at_;  // look_at_start_up(), once an attempt
  std::unique_ptr<FileTimer> file_timer_;
  StatusServers status_;
  std::string failure_report_;
  bool network_checked_ = false;  // --network_check ran (on the first round only)
  std::string unfit_gpus_;        // a static multi-node job's GPU refusal, said after joining
};

Agent::Agent(LaunchPlan plan, std::map<std::string, std::string> environment,
             const std::string& hostname)
    : real_os_(std::make_unique<RealOs>()),
      impl_(std::make_unique<Impl>(std::move(plan), std::move(environment), hostname, *real_os_)) {}

Agent::Agent(LaunchPlan plan, std::map<std::string, std::string> environment,
             const std::string& hostname, Os& os)
    : impl_(std::make_unique<Impl>(std::move(plan), std::move(environment), hostname, os)) {}
Agent::Agent(LaunchPlan plan, std::map<std::string, std::string> environment, Os& os,
             std::unique_ptr<Membership> membership)
    : impl_(std::make_unique<Impl>(std::move(plan), std::move(environment), os,
                                   std::move(membership))) {}
Agent::~Agent() = default;
int Agent::run() {
  return impl_->run();
}
const std::string& Agent::failure_report() const {
  return impl_->failure_report();
}

}  // namespace acc::launcher
