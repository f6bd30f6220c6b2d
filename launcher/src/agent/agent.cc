#include "acc/launcher/agent/agent.h"

#include <linux/magic.h>
#include <signal.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <sstream>

#include "acc/common/error.h"
#include "acc/common/exit_code.h"
#include "acc/common/files.h"
#include "acc/common/int_ranges.h"
#include "acc/common/progress_file.h"
#include "acc/launcher/agent/failure_report.h"
#include "acc/launcher/nodes/membership.h"
#include "agent/error_file.h"
#include "agent/failure_cause.h"
#include "agent/worker_group.h"
#include "hangs/file_timer.h"
#include "hangs/flight_recorder.h"
#include "hangs/python_stack_hook.h"
#include "hangs/stall_watch.h"
#include "host/gpu_health.h"
#include "host/nvml.h"
#include "nodes/job_link.h"
#include "nodes/preflight.h"
#include "output/console.h"
#include "output/log.h"
#include "output/timeline.h"
#include "process/real_os.h"
#include "status/health_check.h"
#include "status/http_server.h"
#include "status/job_status.h"
#include "status/status_server.h"

namespace acc::launcher {
namespace fs = std::filesystem;
using Clock = Os::Clock;

namespace {

// Handled besides --signals-to-handle: SIGUSR1 is forwarded (SLURM's pre-emption warning, a
// script's checkpoint trigger), SIGUSR2 asks for a stack report (`acc-launch stacks`).
constexpr int kAlwaysHandled[] = {SIGUSR1, SIGUSR2};

// How long a node other than 0 whose workers stalled leaves them for node 0 to report the job's
// hang: node 0's own stall watch (its ranks wait in the collective that stalled), the traces of
// every node (at most 2 s) and the stacks (at most 5 s).
constexpr std::chrono::milliseconds kNodeZeroReportWait{10'000};

// Whether any worker's output goes to files of the run directory (--redirects, --tee).
bool writes_log_files(const LaunchPlan& plan) {
  return std::any_of(plan.workers.begin(), plan.workers.end(), [&](const WorkerSpec& w) {
    return plan.redirects.mask_for(w.local_rank) != 0 || plan.tee.mask_for(w.local_rank) != 0;
  });
}

// Where a temporary run directory goes: the temporary directory the user named ($TMPDIR, or the
// other variables std::filesystem::temp_directory_path reads), else a tmpfs with room
// (/dev/shm), else /tmp. Why not /tmp first: a run directory is a dozen directories (the run's,
// the attempt's, the Python hook's, one per worker) that a short job keeps for milliseconds, and
// on a disk file system each is an inode allocation and, at its removal, a freed block; with the
// `discard` mount option that is a synchronous discard, 3.4 ms per rmdir on the 2-core bench VM,
// 37 ms of a 60 ms launch of 8 x /bin/true (bench/README.md). On a tmpfs both cost microseconds.
// Worker logs can be large, so a run that writes them (--redirects, --tee) stays on disk, as does
// one where /dev/shm is small or full (a container's 64 MiB one): its progress files are mapped
// by the workers, and a full tmpfs would fault their writes.
fs::path temporary_base(const LaunchPlan& plan) {
  for (const char* name : {"TMPDIR", "TMP", "TEMP", "TEMPDIR"})
    if (const char* value = std::getenv(name); value && *value) return fs::temp_directory_path();
  constexpr uint64_t kRoomNeeded = 256ull << 20;
  struct statfs shm {};
  if (!writes_log_files(plan) && ::statfs("/dev/shm", &shm) == 0 && shm.f_type == TMPFS_MAGIC &&
      static_cast<uint64_t>(shm.f_bavail) * shm.f_bsize >= kRoomNeeded &&
      ::access("/dev/shm", W_OK | X_OK) == 0)
    return "/dev/shm";
  return fs::temp_directory_path();
}

std::string make_run_dir(const LaunchPlan& plan) {
  fs::path base = plan.log_dir.empty() ? temporary_base(plan) : fs::path(plan.log_dir);
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
  Impl(LaunchPlan plan, std::map<std::string, std::string> environment, Os& os,
       std::unique_ptr<Membership> membership)
      : plan_(std::move(plan)),
        environment_(std::move(environment)),
        os_(os),
        membership_(std::move(membership)) {}

  int run() {
    std::vector<int> taken(std::begin(kAlwaysHandled), std::end(kAlwaysHandled));
    taken.insert(taken.end(), plan_.stop_signals.begin(), plan_.stop_signals.end());
    os_.take_signals(taken);
    start_gpu_check();  // after take_signals: its thread must not take a stop signal
    start_health_check();
    start_status_server();
    membership_->set_stop_check([this] { return arrived_stop_signal(); });
    run_preflight(plan_, [this] { return arrived_stop_signal(); });
    check_gpus();
    run_dir_ = make_run_dir(plan_);
    if (!plan_.no_python_hook) python_hook_dir_ = install_python_stack_hook(run_dir_);
    timeline::mark("run dir");
    start_file_timer();
    for (int attempt = 0;; ++attempt) {
      JobEvent next;
      try {
        if (attempt > 0) await_gpu_release();
        group_.reset();
        job_event_ = {};
        try {
          const Round round = membership_->join(restart_count_);
          timeline::mark("joined");
          if (recovery_) recovery_->joined = os_.now();
          if (!unfit_gpus_.empty()) return refuse_unfit_gpus(round);
          run_attempt(attempt, round);
        } catch (const JobEndedError& e) {
          next.kind = JobEvent::Kind::kEnded;
          next.end = e.end();
          next.shared = true;
          return report_end(attempt, next);
        }
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
        if (membership_changed_) {
          notice("nodes joined or left the job; meeting again (--max_restarts not used)");
          begin_recovery(meet_again_why_.empty() ? "nodes joined or left the job"
                                                 : meet_again_why_);
          continue;
        }
        next = job_event_;
        // Every worker here succeeded: so must every other node's, or the job goes on.
        if (next.kind == JobEvent::Kind::kNone) next = membership_->await_exit(restart_count_);
      } catch (const NotNeeded& e) {
        notice(e.what());
        finish_run_dir();
        return 0;
      } catch (...) {
        if (group_ && group_->keeps_logs()) keep_run_dir_ = true;
        finish_run_dir();
        throw;
      }
      if (next.kind == JobEvent::Kind::kNone) return finish(0);
      if (next.kind == JobEvent::Kind::kRestart) {
        restart_count_ = next.restart_count;
        no_progress_attempts_ = attempt_made_progress() ? 0 : no_progress_attempts_ + 1;
        notice(next.why + "; restarting (" + std::to_string(restart_count_) + " of " +
               std::to_string(plan_.max_restarts) + no_progress_count() + ")");
        begin_recovery(next.why);
        continue;
      }
      return report_end(attempt, next);
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

  // The file timer's pipe has requests.
  void on_readable(int fd) override {
    if (file_timer_ && fd == file_timer_->fd()) file_timer_->read_requests();
    if (fd == membership_fd_ && membership_->take_event()) next_membership_check_ = os_.now();
  }

  // The one place the agent prints a notice.
  void notice(const std::string& message) override { log::info(message); }

 private:
  int finish(int status) {
    if (!recoveries_.empty()) print_goodput();
    if (status_board_) status_board_->job_ended();  // its workers are done; the exit barrier
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

  // Pre-flight GPU health (docs/launch.md, "GPU health"), before joining: a node with an unfit
  // GPU takes no place in an elastic round, so that a spare takes it. A static job of several
  // nodes cannot go on without it: it joins, and ends the job at once for every node
  // (refuse_unfit_gpus), instead of leaving them to wait out their join timeout.
  // NVML's answers take tens of milliseconds (24 ms on an H200: nvmlInit, a device handle, the
  // ECC count), most of a one-node launch: they are asked on a thread of their own from the start,
  // while the network pre-flight and the rest of the set-up run, and check_gpus waits for them.
  void start_gpu_check() {
    if (plan_.worker_gpus.empty()) return;
    gpu_check_ = std::async(std::launch::async, [gpus = plan_.worker_gpus] {
      check_gpu_health(gpus, Nvml::machine());
    });
  }

  void check_gpus() {
    if (!gpu_check_.valid()) return;
    try {
      gpu_check_.get();
    } catch (const GpuError& e) {
      if (plan_.rdzv_backend != "static" || plan_.nnodes == 1) throw;
      unfit_gpus_ = e.what();
    }
  }

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
  // memory, or the new ones may run out of it. Bounded by plan_.gpu_release_timeout, then one
  // line and the restart goes on. Throws InterruptedError for a stop signal meanwhile.
  void await_gpu_release() {
    Nvml* nvml = plan_.worker_gpus.empty() || !group_ ? nullptr : Nvml::machine();
    if (!nvml) return;
    std::vector<int> pids;
    for (const auto& w : group_->workers())
      if (w->pid > 0) pids.push_back(w->pid);
    constexpr std::chrono::milliseconds kStep{100};
    const Clock::time_point start = os_.now();
    for (;;) {
      const auto held = gpu_memory_held_by(nvml->compute_processes(), pids);
      if (held.empty()) return;
      const Clock::time_point now = os_.now();
      if (now - start >= plan_.gpu_release_timeout) {
        log::warn(describe_gpu_memory_held(
            held, std::chrono::duration_cast<std::chrono::milliseconds>(now - start)));
        return;
      }
      membership_->keep_alive();  // the wait may outlast a short keep-alive window
      std::vector<pollfd> none;
      for (int sig : os_.wait(none, std::min(now + kStep, start + plan_.gpu_release_timeout)))
        if (stops_the_job(sig))
          throw InterruptedError(sig, std::string("stopped by SIG") + sigabbrev_np(sig) +
                                          " while waiting for the GPUs' memory");
    }
  }

  // --- one attempt -------------------------------------------------------------------------

  void run_attempt(int attempt, const Round& round) {
    membership_changed_ = false;
    meet_again_why_.clear();
    stalled_ = false;
    stop_stalled_at_.reset();
    stall_watch_.reset();
    group_.reset();
    round_ = round;
    group_ = std::make_unique<WorkerGroup>(os_, plan_, round_, environment_,
                                           run_dir_ + "/attempt_" + std::to_string(attempt),
                                           python_hook_dir_, *this);
    if (file_timer_) group_->watch(file_timer_->fd());
    next_membership_check_ = os_.now() + membership_->poll_interval();
    failure_seen_at_.reset();
    oom_before_ = read_oom_counters();  // a failure that moves them was the OOM killer
    oom_after_.reset();
    group_->start();
    timeline::mark("started");
    // After the spawn, which must not wait for a connection: another node's failure, restart or
    // new round wakes this loop at once (membership.h, event_fd()).
    membership_fd_ = membership_->event_fd();
    if (membership_fd_ >= 0) group_->watch(membership_fd_);
    attempt_started_at_ = os_.now();
    if (!first_started_at_) first_started_at_ = attempt_started_at_;
    if (recovery_) end_recovery(attempt);
    std::vector<StatusBoard::Worker> workers;  // each with its progress file, for both readers
    if (worker_progress_ || status_board_)
      for (const auto& w : group_->workers())
        workers.push_back({w->rank, w->spec.local_rank, w->pid, progress_file_path(w->dir)});
    if (worker_progress_) {
      std::vector<std::string> files;
      for (const StatusBoard::Worker& w : workers) files.push_back(w.progress_file);
      worker_progress_->attempt_started(files);
    }
    if (status_board_) {
      StatusBoard::JobStore store;
      if (round_.nnodes > 1)
        store = {round_.master_addr, round_.master_port, round_.restart_count, round_.nnodes,
                 round_.node_rank};
      status_board_->attempt_started(restart_count_, round_.nnodes, world_size(plan_, round_),
                                     workers, store);
    }
    if (group_->keeps_logs()) keep_run_dir_ = true;
    if (attempt == 0)
      for (const std::string& message : plan_.notices) notice(message);
    start_stall_watch();
    while (group_->running()) {
      group_->wait_once(next_wake());
      publish_failure();
      look_around();
    }
    timeline::mark("exited");
    attempt_ended_at_ = os_.now();
    if (stall_watch_) write_all(STDERR_FILENO, stall_watch_->straggler_summary());
    stall_watch_.reset();
    group_->finish();
    if (worker_progress_) worker_progress_->attempt_ended();
    if (status_board_) status_board_->attempt_ended();
    count_attempt();
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
    if (auto expiry = file_timer_ ? file_timer_->regions().next_expiry() : std::nullopt) {
      const auto left = std::chrono::duration<double>(std::max(0.0, *expiry - wall_seconds()));
      const auto at = os_.now() + std::chrono::ceil<std::chrono::milliseconds>(left);
      wake = std::min(wake.value_or(Clock::time_point::max()), at);
    }
    return wake;
  }

  // While the workers run: the stall watch, and what the other nodes of the job did. While they
  // stop: only keeping this node alive in the job's eyes.
  void look_around() {
    if (status_board_) status_board_->workers_running(group_->running_workers());
    check_file_timer();
    if (stop_stalled_at_ && os_.now() >= *stop_stalled_at_ && !group_->stopping()) stop_stalled();
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
      if (!failure_seen_at_) failure_seen_at_ = os_.now();
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

  // --- recoveries and goodput ---------------------------------------------------------------

  static double seconds_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  }

  // The attempt just ended is followed by another: the recovery runs from the failure this node
  // saw (or, when it saw none, its workers' end) until the next attempt's spawn.
  void begin_recovery(const std::string& cause) {
    recovery_ = PendingRecovery{failure_seen_at_.value_or(attempt_ended_at_), attempt_ended_at_,
                                attempt_ended_at_, cause};
  }

  void end_recovery(int attempt) {
    RecoveryStatus r;
    r.attempt = attempt + 1;
    r.cause = recovery_->cause;
    r.stop_seconds = seconds_between(recovery_->seen, recovery_->stopped);
    r.rendezvous_seconds = seconds_between(recovery_->stopped, recovery_->joined);
    r.spawn_seconds = seconds_between(recovery_->joined, attempt_started_at_);
    r.seconds = seconds_between(recovery_->seen, attempt_started_at_);
    recovery_.reset();
    recoveries_.push_back(r);
    goodput_.recovery_seconds += r.seconds;
    goodput_.lost_seconds += r.seconds;
    notice(describe_recovery(r));
    if (status_board_) {
      status_board_->recovered(r);
      status_board_->set_goodput(goodput_);
    }
  }

  // "attempt 2 started 12.3 ms after the failure was seen (stop 2.1 ms, rendezvous 8.0 ms,
  // spawn 2.2 ms)".
  static std::string describe_recovery(const RecoveryStatus& r) {
    const auto ms = [](double seconds) {
      char text[32];
      std::snprintf(text, sizeof(text), "%.1f ms", seconds * 1000);
      return std::string(text);
    };
    return "attempt " + std::to_string(r.attempt) + " started " + ms(r.seconds) +
           " after the failure was seen (stop " + ms(r.stop_seconds) + ", rendezvous " +
           ms(r.rendezvous_seconds) + ", spawn " + ms(r.spawn_seconds) + ")";
  }

  // The attempt just ended: its wall time counts as progress when its workers made some.
  void count_attempt() {
    const double seconds = seconds_between(attempt_started_at_, attempt_ended_at_);
    if (attempt_made_progress()) {
      goodput_.progress_seconds += seconds;
    } else {
      goodput_.lost_seconds += seconds;
    }
    goodput_.wall_seconds = seconds_between(*first_started_at_, attempt_ended_at_);
    if (status_board_) status_board_->set_goodput(goodput_);
  }

  // At the job's end, after a recovery: each recovery in one line, and where the time went.
  void print_goodput() {
    for (const RecoveryStatus& r : recoveries_)
      notice("recovery " + describe_recovery(r) + "; cause: " + r.cause);
    char line[160];
    std::snprintf(
        line, sizeof(line),
        "goodput: %.1f%% of %.2f s in attempts that made progress; %.3f s in %zu "
        "recoveries; %.2f s lost",
        goodput_.wall_seconds > 0 ? 100.0 * goodput_.progress_seconds / goodput_.wall_seconds : 0.0,
        goodput_.wall_seconds, goodput_.recovery_seconds, recoveries_.size(),
        goodput_.lost_seconds);
    notice(line);
  }

  // --- torchelastic's file timer (file_timer.h) ---------------------------------------------

  // The pipe in the run directory unless the user named one, in every worker's
  // TORCHELASTIC_TIMER_FILE. Not for Accelerate's simple launcher, which gives no torchrun
  // contract.
  void start_file_timer() {
    if (plan_.single_process) return;
    auto given = environment_.find("TORCHELASTIC_TIMER_FILE");
    const std::string path = given != environment_.end() && !given->second.empty()
                                 ? given->second
                                 : run_dir_ + "/timer_fifo";
    file_timer_ = std::make_unique<FileTimer>(path);
    environment_["TORCHELASTIC_TIMER_FILE"] = path;
  }

  static double wall_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  // An expired region: its signal to its pid (torchrun's agent does the same), one line naming
  // the region, the rank and the pid.
  void check_file_timer() {
    if (!file_timer_) return;
    for (const FileTimerRegions::Expiry& expiry :
         file_timer_->regions().take_expired(wall_seconds())) {
      std::string who = "pid " + std::to_string(expiry.pid) + " (not a worker of this node)";
      for (const auto& w : group_->workers())
        if (w->pid == expiry.pid)
          who = "rank " + std::to_string(w->rank) + " (pid " + std::to_string(w->pid) + ")";
      std::string line = "timer region '" + expiry.scope_id + "' of " + who +
                         " expired (torch.distributed.elastic.timer)";
      if (expiry.signal <= 0) {
        log::warn(line + "; its client asked for no signal");
        continue;
      }
      log::warn(line + "; sending it SIG" + sigabbrev_np(expiry.signal));
      os_.signal_process(expiry.pid, expiry.signal);
    }
  }

  // The moment a worker fails, before the others here are stopped: the other nodes learn that
  // the job restarts or ends, and stop theirs too.
  void publish_failure() {
    if (group_->root_cause() && !failure_seen_at_) failure_seen_at_ = os_.now();
    if (job_event_.kind != JobEvent::Kind::kNone || !group_->root_cause() || membership_changed_ ||
        interrupted_by_ || stalled_)
      return;
    if (no_progress_limit_reached()) {
      JobEnd end = own_end();
      end.status = plan_.no_restart_exit_code;
      end.reason = "no restart: " + std::to_string(no_progress_attempts_ + 1) +
                   " attempt(s) in a row failed before any progress, the last as " +
                   describe_root_cause() + " (--max_no_progress_restarts " +
                   std::to_string(plan_.max_no_progress_restarts) + "); exit " +
                   std::to_string(end.status) + " (--no_restart_exit_code)";
      job_event_ = membership_->end_job(end);
      no_restart_ = true;
      return;
    }
    if (restart_count_ < plan_.max_restarts) {
      job_event_ = membership_->restart_job(restart_count_);
      if (job_event_.kind == JobEvent::Kind::kRestart)
        job_event_.why = "worker group failed (" + describe_root_cause() + ")";
    } else {
      job_event_ = membership_->end_job(own_end());
    }
  }

  // --- restarts with sense (NVIDIA's ft_launcher) ----------------------------------------------

  // Whether a worker of this node's attempt made progress: a beat (libacc's optimizer step,
  // acc_launch.beat()) or a completed collective in its progress file. A worker whose file
  // cannot be read (it never appeared) made none. A job of several nodes: each node looks at its
  // own workers only, and the node whose worker failed decides.
  bool attempt_made_progress() const {
    if (!group_) return false;
    for (const auto& w : group_->workers()) {
      try {
        const progress_file::Snapshot s =
            progress_file::Reader(progress_file_path(w->dir)).snapshot(0);
        if (s.beats > 0 || s.completed > 0) return true;
      } catch (const Error&) {
      }
    }
    return false;
  }

  // The attempt that just failed is the --max_no_progress_restarts'th in a row without progress:
  // no restart, whether or not --max_restarts has one left (as ft_launcher, which looks at
  // progress before the restarts left).
  bool no_progress_limit_reached() const {
    return plan_.max_no_progress_restarts > 0 &&
           no_progress_attempts_ + 1 >= plan_.max_no_progress_restarts && !attempt_made_progress();
  }

  // "; 1 of 2 attempts in a row without progress" for the restart notice, with
  // --max_no_progress_restarts.
  std::string no_progress_count() const {
    if (plan_.max_no_progress_restarts == 0) return "";
    return "; " + std::to_string(no_progress_attempts_) + " of " +
           std::to_string(plan_.max_no_progress_restarts) + " attempts in a row without progress";
  }

  // --- torchelastic's health check (health_check.h) -------------------------------------------

  // Before any rendezvous, as torchelastic starts it (a long rendezvous is no hang); after the
  // signals are taken, so that its thread never runs a handler.
  void start_health_check() {
    if (!plan_.health_check_port) return;
    worker_progress_ = std::make_unique<WorkerProgress>(plan_.health_check_timeout);
    health_server_ = std::make_unique<HttpServer>(
        "", *plan_.health_check_port,
        [this](const std::string&) {
          return health_check_reply(worker_progress_->look(), wall_seconds(),
                                    worker_progress_->timeout());
        },
        "the health check on port " + std::to_string(*plan_.health_check_port) +
            " (TORCHELASTIC_HEALTH_CHECK_PORT)");
    char timeout[32];
    std::snprintf(timeout, sizeof(timeout), "%g s",
                  static_cast<double>(plan_.health_check_timeout.count()) / 1000);
    notice("health check on port " + std::to_string(health_server_->port()) +
           " (TORCHELASTIC_HEALTH_CHECK_PORT): 503 after " + timeout +
           " without a worker's progress");
  }

  // --- the job's status (job_status.h) ---------------------------------------------------------

  // With the health check: before any rendezvous, after the signals are taken. Node 0 and every
  // other node serve their own node's workers.
  void start_status_server() {
    if (!plan_.status_port) return;
    status_board_ = std::make_unique<StatusBoard>(plan_.run_id, plan_.hostname, plan_.node_rank);
    const std::string where = plan_.status_host + ":" + std::to_string(*plan_.status_port);
    status_server_ = std::make_unique<HttpServer>(
        plan_.status_host, *plan_.status_port,
        [board = status_board_.get()](const std::string& path) {
          return status_reply(*board, path);
        },
        "the job's status on " + where + " (--status_host, --status_port)");
    status_exchange_ = std::make_unique<StatusExchange>(*status_board_);
    status_server_->every(1000, [board = status_board_.get(), exchange = status_exchange_.get()] {
      board->sample();
      exchange->run();
    });
    const std::string url = status_url(plan_.status_host, status_server_->port());
    status_url_file_ = std::make_unique<StatusUrlFile>(url);
    notice("status of the job at " + url + " (/metrics for Prometheus, /api/job)");
  }

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
      std::vector<WorkerOutcome> outcomes = collect_outcomes();
      if (!here || !root) {
        for (WorkerOutcome& o : outcomes) o.root_cause = false;
        if (end.rank >= 0) outcomes.push_back(remote_outcome(end));
      }
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

  JobEnd own_end() {
    const Worker& w = *group_->root_cause();
    const WorkerOutcome outcome = exit_of(w);
    JobEnd end;
    end.node = round_.node_rank;
    end.host = plan_.hostname;
    end.rank = w.rank;
    end.local_rank = w.spec.local_rank;
    end.pid = w.pid;
    end.exit_code = outcome.exit_code;
    end.signal = outcome.signal;
    end.status = failure_exit_status(outcome);
    end.reason = describe_root_cause();
    return end;
  }

  static WorkerOutcome remote_outcome(const JobEnd& end) {
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

  // --- hangs (stall_watch.h) -------------------------------------------------------------------

  void start_stall_watch() {
    std::vector<StallWatch::Worker> watched;
    for (const auto& w : group_->workers())
      watched.push_back({w->rank, w->spec.local_rank, w->pid, w->dir});
    stall_watch_ = std::make_unique<StallWatch>(
        plan_, round_, std::move(watched), plan_.stall_timeout,
        [this](const std::string& m) { notice(m); }, [this] { return os_.now(); });
  }

  void on_stall() {
    membership_->keep_alive();  // collecting stacks takes seconds without a beat
    const std::string report = stall_watch_->report(group_->running_workers(), true);
    keep_run_dir_ = true;
    const std::string path = run_dir_ + "/hang_report.txt";
    append_report(path, report);
    write_all(STDERR_FILENO, report);
    if (status_board_) status_board_->stalled(report);
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
    if (status_board_ && stall_watch_) status_board_->hang_report(report);
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

  std::string describe_root_cause() {
    const Worker& w = *group_->root_cause();
    std::string line =
        "rank " + std::to_string(w.rank) + " exited with " + describe_exit(exit_of(w));
    const std::string cause = explain(w);
    return cause.empty() ? line : line + ": " + cause;
  }

  // Why `w` failed, in one line (failure_cause.h); the OOM killer's counters are read once, when
  // the first failure is seen.
  std::string explain(const Worker& w) {
    if (!oom_after_) oom_after_ = read_oom_counters();
    FailureFacts facts;
    const WorkerOutcome outcome = exit_of(w);
    facts.exit_code = outcome.exit_code;
    facts.signal = outcome.signal;
    facts.peak_rss_kib = w.peak_rss_kib;
    facts.stderr_tail.assign(w.stderr_tail.begin(), w.stderr_tail.end());
    if (auto error = read_error_file(w.dir + "/error.json")) facts.error_message = error->message;
    if (w.signalled_by_launcher)
      facts.sent_by = stalled_          ? "the launcher: its workers stopped making progress"
                      : interrupted_by_ ? std::string("the launcher, passing on the SIG") +
                                              sigabbrev_np(interrupted_by_) + " it was sent"
                                        : "the launcher";
    facts.before = oom_before_;
    facts.after = *oom_after_;
    return explain_failure(facts);
  }

  std::vector<WorkerOutcome> collect_outcomes() {
    std::vector<WorkerOutcome> outcomes;
    for (const auto& w : group_->workers()) {
      WorkerOutcome o = exit_of(*w);
      o.rank = w->rank;
      o.local_rank = w->spec.local_rank;
      o.host = plan_.hostname;
      o.pid = w->pid;
      o.time = w->exit_time_text();
      o.root_cause = w.get() == group_->root_cause();
      o.stopped_by_launcher = !o.root_cause && w->signalled_by_launcher && w->failed();
      if (keep_run_dir_ || !plan_.log_dir.empty()) o.log_file = w->dir + "/stderr.log";
      if (o.root_cause) {
        o.cause = explain(*w);
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
    if (keep_run_dir_ || !plan_.log_dir.empty()) {
      notice("logs in " + run_dir_);
    } else {
      remove_tree(run_dir_);
    }
  }

  LaunchPlan plan_;
  std::map<std::string, std::string> environment_;
  Os& os_;
  std::unique_ptr<Membership> membership_;
  Round round_;
  int restart_count_ = 0;  // failure restarts so far: the job's, on a static multi-node job
  JobEvent job_event_;     // this attempt's: another node's restart or end, or this node's
  bool membership_changed_ = false;
  std::string meet_again_why_;  // the membership's reason, when it gave one
  std::string membership_error_;
  Clock::time_point next_membership_check_;
  int membership_fd_ = -1;  // membership_->event_fd() of the running attempt, or -1
  OomCounters oom_before_;  // at the attempt's start
  struct PendingRecovery {
    Clock::time_point seen;     // the failure, as this node saw it
    Clock::time_point stopped;  // its workers had all ended
    Clock::time_point joined;   // the next attempt was agreed
    std::string cause;
  };
  std::optional<PendingRecovery> recovery_;  // between an attempt's end and the next's spawn
  std::optional<Clock::time_point> failure_seen_at_;  // this attempt's
  Clock::time_point attempt_started_at_;
  Clock::time_point attempt_ended_at_;
  std::optional<Clock::time_point> first_started_at_;
  std::vector<RecoveryStatus> recoveries_;
  GoodputStatus goodput_;
  std::optional<OomCounters> oom_after_;  // at its first failure
  std::string run_dir_;
  bool keep_run_dir_ = false;
  std::string python_hook_dir_;
  std::unique_ptr<WorkerGroup> group_;
  int interrupted_by_ = 0;
  std::unique_ptr<StallWatch> stall_watch_;
  bool stalled_ = false;
  // A node other than 0 whose workers stalled stops them at this time unless node 0 has ended
  // the job first (on_stall).
  std::optional<Clock::time_point> stop_stalled_at_;
  std::unique_ptr<FileTimer> file_timer_;
  int no_progress_attempts_ = 0;  // failed attempts in a row without progress on this node
  bool no_restart_ = false;       // --max_no_progress_restarts ended the job here
  std::unique_ptr<WorkerProgress> worker_progress_;  // with the health check: what it reads
  std::unique_ptr<HttpServer> health_server_;
  std::unique_ptr<StatusBoard> status_board_;  // with --status_port
  std::unique_ptr<StatusExchange> status_exchange_;
  std::unique_ptr<HttpServer> status_server_;
  std::unique_ptr<StatusUrlFile> status_url_file_;
  std::string failure_report_;
  std::future<void> gpu_check_;  // the pre-flight GPU health check (start_gpu_check)
  std::string unfit_gpus_;       // a static multi-node job's GPU refusal, said after joining
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
