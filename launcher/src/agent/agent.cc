#include "acc/launcher/agent/agent.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "acc/common/error.h"
#include "acc/launcher/agent/failure_report.h"
#include "acc/launcher/host/host.h"
#include "acc/launcher/nodes/membership.h"
#include "acc/launcher/output/int_ranges.h"
#include "acc/launcher/output/line_dedup.h"
#include "acc/launcher/output/line_splitter.h"
#include "agent/error_file.h"
#include "agent/worker_stream.h"
#include "observe/python_stack_hook.h"
#include "observe/stall_watch.h"
#include "output/console.h"
#include "output/deduped_console.h"
#include "output/log.h"
#include "process/spawn.h"
#include "process/watchdog.h"

namespace acc::launcher {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Handled besides --signals-to-handle: SIGUSR1 is forwarded (SLURM's pre-emption warning, a
// script's checkpoint trigger), SIGUSR2 asks for a stack report (`acc-launch stacks`).
constexpr int kAlwaysHandled[] = {SIGUSR1, SIGUSR2};

std::string wall_time_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm local{};
  ::localtime_r(&seconds, &local);
  char text[64];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &local);
  char with_millis[80];
  std::snprintf(with_millis, sizeof(with_millis), "%s.%03d", text, static_cast<int>(millis));
  return with_millis;
}

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

}  // namespace

struct Worker {
  WorkerSpec spec;
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;  // as waitpid reports it
  std::string exit_time;
  bool signalled_by_launcher = false;
  std::string dir;
  std::deque<std::string> stderr_tail;
  Stream out;
  Stream err;

  bool failed() const { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }
};

class Agent::Impl {
 public:
  Impl(LaunchPlan plan, std::map<std::string, std::string> environment, const std::string& hostname)
      : plan_(std::move(plan)),
        environment_(std::move(environment)),
        membership_(make_membership(plan_, hostname)) {}

  ~Impl() {
    if (signal_fd_ >= 0) ::close(signal_fd_);
  }

  int run() {
    install_signal_handling();
    watchdog_ = std::make_unique<Watchdog>();
    run_dir_ = make_run_dir(plan_);
    python_hook_dir_ = install_python_stack_hook(run_dir_);
    int restart_count = 0;
    for (int attempt = 0;; ++attempt) {
      try {
        run_attempt(attempt, membership_->join(restart_count));
      } catch (...) {
        finish_run_dir();
        throw;
      }
      if (interrupted_by_) {
        notice(std::string("stopped by ") + sigabbrev_np(interrupted_by_) +
               ", forwarded to the workers");
        return finish(128 + interrupted_by_);
      }
      if (stalled_) return finish(4);  // TimeoutError's exit status (docs/errors.md)
      if (membership_changed_) {
        notice("nodes joined or left the job; meeting again (no restart used)");
        continue;
      }
      if (!root_cause_) return finish(0);
      if (restart_count < plan_.max_restarts) {
        ++restart_count;
        notice("worker group failed (" + describe_root_cause() + "); restarting (" +
               std::to_string(restart_count) + " of " + std::to_string(plan_.max_restarts) + ")");
        continue;
      }
      std::vector<WorkerOutcome> outcomes = collect_outcomes();
      write_all(STDERR_FILENO, format_failure_report(plan_.program, attempt + 1, outcomes));
      return finish(failure_exit_status(*std::find_if(
          outcomes.begin(), outcomes.end(), [](const WorkerOutcome& o) { return o.root_cause; })));
    }
  }

 private:
  int finish(int status) {
    membership_->leave(status == 0);
    finish_run_dir();
    return status;
  }

  bool stops_the_job(int sig) const {
    return std::find(plan_.stop_signals.begin(), plan_.stop_signals.end(), sig) !=
           plan_.stop_signals.end();
  }

  void notice(const std::string& message) { log::info(message); }

  void install_signal_handling() {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    for (int s : kAlwaysHandled) sigaddset(&mask, s);
    for (int s : plan_.stop_signals) sigaddset(&mask, s);
    ::sigprocmask(SIG_BLOCK, &mask, nullptr);
    signal_fd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    ACC_CHECK(signal_fd_ >= 0, SystemError, "signalfd: ", std::strerror(errno));
    ::signal(SIGPIPE, SIG_IGN);
    // Orphaned grandchildren of the workers come to us, so none outlives the job unreaped.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  }

  // --- one attempt -------------------------------------------------------------------------

  void run_attempt(int attempt, const Round& round) {
    root_cause_ = nullptr;
    stopping_ = false;
    killed_ = false;
    membership_changed_ = false;
    stalled_ = false;
    stall_watch_.reset();
    workers_.clear();
    round_ = round;
    start_dedup();
    attempt_dir_ = run_dir_ + "/attempt_" + std::to_string(attempt);
    next_membership_check_ = Clock::now() + membership_->poll_interval();
    try {
      std::vector<SpawnedProcess> started;
      for (const WorkerSpec& spec : plan_.workers) started.push_back(start_worker(spec));
      for (SpawnedProcess& process : started) await_exec(process);
    } catch (...) {
      stop_all(SIGKILL);
      while (any_running()) wait_for_events();
      close_streams();
      throw;
    }
    if (attempt == 0)
      for (const std::string& message : plan_.notices) notice(message);
    start_stall_watch();
    while (any_running()) wait_for_events();
    stall_watch_.reset();
    close_streams();
    reap_leftovers();
    ACC_CHECK(membership_error_.empty(), NetworkError,
              "lost the job's rendezvous: ", membership_error_);
  }

  // Whatever the workers started outside their groups and left behind was reparented to us
  // (a subreaper): end it, so that nothing outlives the attempt and no zombie is left.
  void reap_leftovers() {
    const std::string list = "/proc/self/task/" + std::to_string(::getpid()) + "/children";
    for (int round = 0; round < 100; ++round) {
      std::ifstream file(list);
      std::vector<pid_t> children;
      for (pid_t pid; file >> pid;)
        if (pid != watchdog_->pid()) children.push_back(pid);
      if (children.empty()) return;
      for (pid_t pid : children) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  }

  SpawnedProcess start_worker(const WorkerSpec& spec) {
    auto worker = std::make_unique<Worker>();
    worker->spec = spec;
    worker->rank = global_rank(plan_, round_, spec.local_rank);
    worker->dir = attempt_dir_ + "/" + std::to_string(spec.local_rank);
    fs::create_directories(worker->dir);
    const std::string error_file = worker->dir + "/error.json";

    std::map<std::string, std::string> env = environment_;
    const std::vector<int> cpus = cpus_of(spec.local_rank);
    if (!cpus.empty()) env.try_emplace("OMP_NUM_THREADS", std::to_string(cpus.size()));
    for (const auto& [key, value] : plan_.env_defaults) env.try_emplace(key, value);
    for (const auto& [key, value] : worker_env(plan_, spec, round_, error_file)) env[key] = value;
    for (const auto& [key, value] : python_stack_hook_env(
             python_hook_dir_, worker->dir, env["PYTHONPATH"], env.count("PYTHONFAULTHANDLER") > 0))
      env[key] = value;
    SpawnRequest request;
    request.argv = spec.argv;
    request.cpus = cpus;
    auto path = env.find("PATH");
    request.executable =
        resolve_executable(spec.argv.front(), path == env.end() ? "/usr/bin:/bin" : path->second);
    for (const auto& [key, value] : env) request.env.push_back(key + "=" + value);
    const std::string prefix = expand_prefix(plan_, spec, round_);
    setup_stream(*worker, worker->out, StreamSpec::kStdout, prefix, STDOUT_FILENO, "stdout.log");
    setup_stream(*worker, worker->err, StreamSpec::kStderr, prefix, STDERR_FILENO, "stderr.log");
    // With --dedup_lines or --stall_timeout every line must pass through us.
    request.capture_stdout =
        plan_.dedup_lines || plan_.stall_timeout > 0 ||
        !(worker->out.file_fd < 0 && worker->out.console_fd >= 0 && prefix.empty());
    const int index = static_cast<int>(workers_.size());
    worker->out.on_progress = worker->err.on_progress = [this, index] {
      if (stall_watch_) stall_watch_->progress(index);
    };
    worker->err.tail = &worker->stderr_tail;

    SpawnedProcess process = spawn_process(request);
    worker->pid = process.pid;
    worker->running = true;
    watchdog_->watch(process.pid);
    worker->out.fd = process.stdout_fd;
    worker->err.fd = process.stderr_fd;
    if (!request.capture_stdout) worker->out.console_fd = -1;
    workers_.push_back(std::move(worker));
    return process;
  }

  std::vector<int> cpus_of(int local_rank) const {
    return local_rank < static_cast<int>(plan_.worker_cpus.size()) ? plan_.worker_cpus[local_rank]
                                                                   : std::vector<int>{};
  }

  void setup_stream(Worker& worker, Stream& stream, int which, const std::string& prefix,
                    int console, const char* file_name) {
    const int local_rank = worker.spec.local_rank;
    const bool redirected = plan_.redirects.mask_for(local_rank) & which;
    const bool teed = plan_.tee.mask_for(local_rank) & which;
    const bool shown =
        plan_.console_local_ranks.empty() || plan_.console_local_ranks.count(local_rank) > 0;
    stream.prefix = prefix;
    stream.console_fd = redirected || !shown ? -1 : console;
    stream.local_rank = local_rank;
    stream.dedup = stream.console_fd < 0 || !dedup_ ? nullptr : dedup_->for_console(console);
    if (stream.dedup) stream.dedup->add_source(local_rank);
    if (redirected || teed || !plan_.log_dir.empty()) {
      const std::string path = worker.dir + "/" + file_name;
      stream.file_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      ACC_CHECK(stream.file_fd >= 0, SystemError, "cannot write ", path, ": ",
                std::strerror(errno));
      if (redirected || teed) keep_run_dir_ = true;
    }
  }

  bool any_running() const {
    return std::any_of(workers_.begin(), workers_.end(), [](const auto& w) { return w->running; });
  }

  // Waits for output, a child's exit, a signal or the stop deadline, and handles what came.
  void wait_for_events() {
    std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
    std::vector<Stream*> streams;
    for (auto& w : workers_) {
      for (Stream* s : {&w->out, &w->err}) {
        if (s->fd < 0) continue;
        fds.push_back({s->fd, POLLIN, 0});
        streams.push_back(s);
      }
    }
    // Wake for the SIGKILL deadline while stopping, else for the next membership check.
    std::optional<Clock::time_point> wake;
    if (stopping_ && !killed_) wake = kill_deadline_;
    if (!stopping_ && membership_->poll_interval().count() > 0) wake = next_membership_check_;
    if (auto due = dedup_ ? dedup_->next_due() : std::nullopt)
      wake = wake ? std::min(*wake, *due) : *due;
    if (!stopping_ && stall_watch_ && stall_watch_->next_wake() != Clock::time_point::max())
      wake = std::min(wake.value_or(Clock::time_point::max()), stall_watch_->next_wake());
    int timeout = -1;
    if (wake) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*wake - Clock::now());
      timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    const int ready = ::poll(fds.data(), fds.size(), timeout);
    if (ready < 0 && errno != EINTR) throw SystemError(std::string("poll: ") + strerror(errno));

    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Stream* stream = streams[i - 1];
      if (stream->read_some() == Stream::Read::kEnd) {
        stream->splitter.finish();
        if (stream->dedup) stream->dedup->finish_source(stream->local_rank);
        stream->flush_console();
        ::close(stream->fd);
        stream->fd = -1;
      }
    }
    if (dedup_) dedup_->write(false);
    if (fds[0].revents & POLLIN) handle_signals();
    if (!stopping_ && stall_watch_ && stall_watch_->tick()) on_stall();
    if (!stopping_ && membership_->poll_interval().count() > 0 &&
        Clock::now() >= next_membership_check_) {
      next_membership_check_ = Clock::now() + membership_->poll_interval();
      try {
        if (membership_->changed()) {
          membership_changed_ = true;
          begin_stop(SIGTERM);
        }
      } catch (const Error& e) {
        // The job's store is gone (its node died) or broke: this node cannot go on.
        membership_error_ = e.what();
        begin_stop(SIGTERM);
      }
    }
    if (stopping_ && !killed_ && Clock::now() >= kill_deadline_) {
      notice("workers still running " + std::to_string(plan_.shutdown_timeout) +
             " s after the stop signal; sending SIGKILL");
      stop_all(SIGKILL);
    }
  }

  void handle_signals() {
    signalfd_siginfo info{};
    while (::read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) {
        reap_children();
      } else if (!stops_the_job(sig) && sig == SIGUSR2) {
        report_on_demand();
      } else if (!stops_the_job(sig)) {
        signal_all(sig);
      } else if (stopping_) {
        stop_all(SIGKILL);  // asked twice: stop waiting
      } else {
        interrupted_by_ = sig;
        begin_stop(sig);
      }
    }
  }

  void reap_children() {
    for (;;) {
      siginfo_t info{};
      if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
      Worker* worker = find_worker(info.si_pid);
      // While the exited leader is unreaped its group id cannot be reused: clear out whatever
      // the worker left running in its group.
      if (worker) ::kill(-worker->pid, SIGKILL);
      int status = 0;
      ::waitpid(info.si_pid, &status, 0);
      if (worker) {
        watchdog_->forget(worker->pid);
        on_worker_exit(*worker, status);
      }
    }
  }

  Worker* find_worker(pid_t pid) {
    for (auto& w : workers_)
      if (w->pid == pid && w->running) return w.get();
    return nullptr;
  }

  void on_worker_exit(Worker& worker, int status) {
    worker.running = false;
    worker.status = status;
    worker.exit_time = wall_time_now();
    if (worker.failed() && !stopping_) {
      root_cause_ = &worker;
      begin_stop(SIGTERM);
    }
  }

  void begin_stop(int sig) {
    stopping_ = true;
    kill_deadline_ = Clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(plan_.shutdown_timeout * 1000));
    signal_all(sig);
    for (auto& w : workers_)
      if (w->running) w->signalled_by_launcher = true;
  }

  void signal_all(int sig) {
    for (auto& w : workers_)
      if (w->running) ::kill(-w->pid, sig);
  }

  void stop_all(int sig) {
    if (sig == SIGKILL) killed_ = true;
    signal_all(sig);
  }

  void close_streams() {
    for (auto& w : workers_) {
      w->out.close_all();
      w->err.close_all();
    }
    if (dedup_) dedup_->write(true);
  }

  // --dedup_lines: the console lines of this attempt go through one DedupedConsole.
  void start_dedup() {
    dedup_.reset();
    if (!plan_.dedup_lines) return;
    auto prefix = [this](const std::vector<int>& local_ranks) {
      std::vector<int> ranks;
      for (int local_rank : local_ranks) ranks.push_back(global_rank(plan_, round_, local_rank));
      return expand_group_prefix(plan_.log_line_prefix, ranks, local_ranks, plan_.role,
                                 plan_.hostname);
    };
    dedup_ =
        std::make_unique<DedupedConsole>(std::chrono::milliseconds(plan_.dedup_window_ms), prefix);
  }

  // --- hangs (stall_watch.h) -------------------------------------------------------------------

  void start_stall_watch() {
    std::vector<StallWatch::Worker> watched;
    for (const auto& w : workers_) watched.push_back({w->rank, w->spec.local_rank, w->pid, w->dir});
    stall_watch_ = std::make_unique<StallWatch>(
        plan_, round_, std::move(watched),
        std::chrono::milliseconds(static_cast<int64_t>(plan_.stall_timeout * 1000)));
  }

  std::vector<bool> running_workers() const {
    std::vector<bool> running;
    for (const auto& w : workers_) running.push_back(w->running);
    return running;
  }

  void on_stall() {
    const std::string report = stall_watch_->report(running_workers(), true);
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
    begin_stop(SIGTERM);
  }

  // SIGUSR2, from `acc-launch stacks`: the report to stderr and to the file that command reads.
  void report_on_demand() {
    const std::string report = stall_watch_ ? stall_watch_->report(running_workers(), false)
                                            : "acc-launch: no workers are running right now\n";
    write_all(STDERR_FILENO, report);
    publish_on_demand_report(report);
  }

  // --- reporting -----------------------------------------------------------------------------

  std::string describe_root_cause() const {
    WorkerOutcome outcome;
    outcome.exit_code = WIFEXITED(root_cause_->status) ? WEXITSTATUS(root_cause_->status) : 0;
    outcome.signal = WIFSIGNALED(root_cause_->status) ? WTERMSIG(root_cause_->status) : 0;
    return "rank " + std::to_string(root_cause_->rank) + " exited with " + describe_exit(outcome);
  }

  std::vector<WorkerOutcome> collect_outcomes() const {
    std::vector<WorkerOutcome> outcomes;
    for (const auto& w : workers_) {
      WorkerOutcome o;
      o.rank = w->rank;
      o.local_rank = w->spec.local_rank;
      o.host = plan_.hostname;
      o.pid = w->pid;
      o.exit_code = WIFEXITED(w->status) ? WEXITSTATUS(w->status) : 0;
      o.signal = WIFSIGNALED(w->status) ? WTERMSIG(w->status) : 0;
      o.time = w->exit_time;
      o.root_cause = w.get() == root_cause_;
      o.stopped_by_launcher = !o.root_cause && w->signalled_by_launcher && w->failed();
      if (w->err.file_fd >= 0 || keep_run_dir_ || !plan_.log_dir.empty())
        o.log_file = w->dir + "/stderr.log";
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
  std::unique_ptr<Membership> membership_;
  Round round_;
  bool membership_changed_ = false;
  std::string membership_error_;
  Clock::time_point next_membership_check_;
  int signal_fd_ = -1;
  std::string run_dir_;
  std::string attempt_dir_;
  bool keep_run_dir_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<DedupedConsole> dedup_;
  Worker* root_cause_ = nullptr;
  bool stopping_ = false;
  bool killed_ = false;
  int interrupted_by_ = 0;
  Clock::time_point kill_deadline_;
  std::string python_hook_dir_;
  std::unique_ptr<StallWatch> stall_watch_;
  bool stalled_ = false;
};

Agent::Agent(LaunchPlan plan, std::map<std::string, std::string> environment,
             const std::string& hostname)
    : impl_(std::make_unique<Impl>(std::move(plan), std::move(environment), hostname)) {}
Agent::~Agent() = default;
int Agent::run() {
  return impl_->run();
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
