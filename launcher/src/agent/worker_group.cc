#include "agent/worker_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <sstream>

#include "acc/common/error.h"
#include "acc/common/progress_file.h"
#include "acc/common/strings.h"
#include "acc/launcher/host/host.h"
#include "observe/flight_recorder.h"
#include "observe/python_stack_hook.h"
#include "output/console.h"

namespace acc::launcher {
namespace fs = std::filesystem;

namespace {

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

}  // namespace

bool Worker::failed() const {
  return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

WorkerGroup::WorkerGroup(Os& os, const LaunchPlan& plan, const Round& round,
                         const std::map<std::string, std::string>& environment,
                         std::string attempt_dir, std::string python_hook_dir, Listener& listener)
    : os_(os),
      plan_(plan),
      round_(round),
      environment_(environment),
      attempt_dir_(std::move(attempt_dir)),
      python_hook_dir_(std::move(python_hook_dir)),
      listener_(listener) {
  start_dedup();
}

WorkerGroup::~WorkerGroup() = default;

void WorkerGroup::start() {
  try {
    std::vector<SpawnedProcess> started;
    for (const WorkerSpec& spec : plan_.workers) started.push_back(start_worker(spec));
    for (SpawnedProcess& process : started) os_.await_exec(process);
  } catch (...) {
    kill();
    while (running()) wait_once(std::nullopt);
    finish();
    throw;
  }
}

SpawnedProcess WorkerGroup::start_worker(const WorkerSpec& spec) {
  auto worker = std::make_unique<Worker>();
  worker->spec = spec;
  worker->rank = global_rank(plan_, round_, spec.local_rank);
  worker->dir = attempt_dir_ + "/" + std::to_string(spec.local_rank);
  fs::create_directories(worker->dir);
  const std::string error_file = worker->dir + "/error.json";
  // The worker's progress file exists before it starts, so that its first write needs no
  // setup and the stall watch can map it at once (a sparse 64 KiB file: one create, one write).
  progress_file::create(progress_file_path(worker->dir));

  std::map<std::string, std::string> env = environment_;
  const std::vector<int> cpus = spec.local_rank < static_cast<int>(plan_.worker_cpus.size())
                                    ? plan_.worker_cpus[spec.local_rank]
                                    : std::vector<int>{};
  if (!cpus.empty()) env.try_emplace("OMP_NUM_THREADS", std::to_string(cpus.size()));
  for (const auto& [key, value] : plan_.env_defaults) env.try_emplace(key, value);
  if (!round_.socket_interface.empty())
    env.try_emplace("GLOO_SOCKET_IFNAME", round_.socket_interface);
  for (const auto& [key, value] : flight_recorder_env(worker->dir, plan_.worker_torch))
    if (!torch_env::is_set(environment_, key)) env.emplace(key, value);
  for (const auto& [key, value] : worker_env(plan_, spec, round_, error_file)) env[key] = value;
  for (const auto& [key, value] : python_stack_hook_env(
           python_hook_dir_, worker->dir, env["PYTHONPATH"], env.count("PYTHONFAULTHANDLER") > 0))
    env[key] = value;
  SpawnRequest request;
  request.argv = spec.argv;
  request.cpus = cpus;
  auto path = env.find("PATH");
  const std::string search_path = path == env.end() ? "/usr/bin:/bin" : path->second;
  for (const auto& [key, value] : env) request.env.push_back(key + "=" + value);
  const std::string prefix = expand_prefix(plan_, spec, round_);
  setup_stream(*worker, worker->out, StreamSpec::kStdout, prefix, STDOUT_FILENO, "stdout.log");
  setup_stream(*worker, worker->err, StreamSpec::kStderr, prefix, STDERR_FILENO, "stderr.log");
  // With --dedup_lines or --stall_timeout every line must pass through us.
  request.capture_stdout = plan_.dedup_lines || plan_.stall_timeout.count() > 0 ||
                           !(!worker->out.file_fd && worker->out.console_fd >= 0 && prefix.empty());
  const int index = static_cast<int>(workers_.size());
  worker->out.on_progress =
      worker->err.on_progress = [this, index] { listener_.on_progress(index); };
  worker->err.tail = &worker->stderr_tail;

  SpawnedProcess process = os_.spawn(std::move(request), search_path);
  worker->pid = process.pid;
  worker->running = true;
  worker->out.fd.reset(process.stdout_fd);
  worker->err.fd.reset(process.stderr_fd);
  if (!worker->out.fd) worker->out.console_fd = -1;
  workers_.push_back(std::move(worker));
  return process;
}

void WorkerGroup::setup_stream(Worker& worker, Stream& stream, int which, const std::string& prefix,
                               int console, const char* file_name) {
  const int local_rank = worker.spec.local_rank;
  const bool redirected = plan_.redirects.mask_for(local_rank) & which;
  const bool teed = plan_.tee.mask_for(local_rank) & which;
  const bool shown =
      plan_.console_local_ranks.empty() || plan_.console_local_ranks.count(local_rank) > 0;
  stream.prefix = prefix;
  stream.console_fd = redirected || !shown ? -1 : console;
  stream.local_rank = local_rank;
  stream.now = [this] { return os_.now(); };
  stream.dedup = stream.console_fd < 0 || !dedup_ ? nullptr : dedup_->for_console(console);
  if (stream.dedup) stream.dedup->add_source(local_rank);
  if (redirected || teed || !plan_.log_dir.empty()) {
    const std::string path = worker.dir + "/" + file_name;
    stream.file_fd.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    ACC_CHECK(stream.file_fd, SystemError, "cannot write ", path, ": ", std::strerror(errno));
    if (redirected || teed) keeps_logs_ = true;
  }
}

// --dedup_lines: the console lines of this attempt go through one DedupedConsole.
void WorkerGroup::start_dedup() {
  if (!plan_.dedup_lines) return;
  auto prefix = [this](const std::vector<int>& local_ranks) {
    std::vector<int> ranks;
    for (int local_rank : local_ranks) ranks.push_back(global_rank(plan_, round_, local_rank));
    return expand_group_prefix(plan_.log_line_prefix, ranks, local_ranks, plan_.role,
                               plan_.hostname);
  };
  dedup_ = std::make_unique<DedupedConsole>(plan_.dedup_window, prefix);
}

bool WorkerGroup::running() const {
  return std::any_of(workers_.begin(), workers_.end(), [](const auto& w) { return w->running; });
}

std::vector<bool> WorkerGroup::running_workers() const {
  std::vector<bool> running;
  for (const auto& w : workers_) running.push_back(w->running);
  return running;
}

std::vector<const Worker*> WorkerGroup::unkillable() const {
  std::vector<const Worker*> found;
  for (const auto& w : workers_)
    if (w->unkillable) found.push_back(w.get());
  return found;
}

void WorkerGroup::wait_once(std::optional<Clock::time_point> wake) {
  std::vector<pollfd> fds;
  std::vector<Stream*> streams;
  for (auto& w : workers_) {
    for (Stream* s : {&w->out, &w->err}) {
      if (!s->fd) continue;
      fds.push_back({s->fd.get(), POLLIN, 0});
      streams.push_back(s);
    }
  }
  auto earliest = [&wake](Clock::time_point t) { wake = wake ? std::min(*wake, t) : t; };
  if (stopping_ && !killed_) earliest(kill_deadline_);
  if (killed_ && running()) earliest(given_up_after_);
  if (auto due = dedup_ ? dedup_->next_due() : std::nullopt) earliest(*due);

  const size_t first_watched = fds.size();
  for (int fd : watched_fds_) fds.push_back({fd, POLLIN, 0});
  const std::vector<int> signals = os_.wait(fds, wake);
  for (size_t i = first_watched; i < fds.size(); ++i)
    if (fds[i].revents & POLLIN) listener_.on_readable(fds[i].fd);
  fds.resize(first_watched);
  read_streams(fds, streams);
  if (dedup_) dedup_->write(false, os_.now());
  for (int sig : signals) {
    if (sig == SIGCHLD) {
      reap_children();
    } else {
      listener_.on_signal(sig);
    }
  }
  if (stopping_ && !killed_ && os_.now() >= kill_deadline_) {
    listener_.notice("workers still running " + decimal_seconds(plan_.shutdown_timeout) +
                     " s after the stop signal; sending SIGKILL");
    kill();
  }
  if (killed_ && running() && os_.now() >= given_up_after_) give_up_on_unkillable();
}

void WorkerGroup::read_streams(const std::vector<pollfd>& fds,
                               const std::vector<Stream*>& streams) {
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Stream* stream = streams[i];
    if (stream->read_some() == Stream::Read::kEnd) {
      stream->splitter.finish();
      if (stream->dedup) stream->dedup->finish_source(stream->local_rank);
      stream->flush_console();
      stream->fd.reset();
    }
  }
}

void WorkerGroup::reap_children() {
  while (std::optional<pid_t> pid = os_.exited_child()) {
    Worker* worker = find_worker(*pid);
    // While the exited leader is unreaped its group id cannot be reused: clear out whatever
    // the worker left running in its group.
    if (worker) os_.signal_group(worker->pid, SIGKILL);
    const int status = os_.reap(*pid);
    if (worker) {
      os_.forget(worker->pid);
      on_worker_exit(*worker, status);
    }
  }
}

Worker* WorkerGroup::find_worker(pid_t pid) {
  for (auto& w : workers_)
    if (w->pid == pid && w->running) return w.get();
  return nullptr;
}

void WorkerGroup::on_worker_exit(Worker& worker, int status) {
  worker.running = false;
  worker.status = status;
  worker.exit_time = wall_time_now();
  if (worker.failed() && !stopping_) {
    root_cause_ = &worker;
    stop(SIGTERM);
  }
}

// A process that SIGKILL does not end sleeps in the kernel (a GPU driver, RDMA, NFS): waiting
// for it would hold the launcher, and the allocation, forever. The agent names it and ends.
void WorkerGroup::give_up_on_unkillable() {
  for (auto& w : workers_) {
    if (!w->running) continue;
    w->running = false;
    w->unkillable = true;
  }
}

void WorkerGroup::stop(int sig) {
  stopping_ = true;
  kill_deadline_ = os_.now() + plan_.shutdown_timeout;
  signal_all(sig);
  for (auto& w : workers_)
    if (w->running) w->signalled_by_launcher = true;
}

void WorkerGroup::kill() {
  if (!killed_) given_up_after_ = os_.now() + plan_.kill_timeout;
  killed_ = true;
  signal_all(SIGKILL);
}

void WorkerGroup::signal_all(int sig) {
  for (auto& w : workers_)
    if (w->running) os_.signal_group(w->pid, sig);
}

void WorkerGroup::finish() {
  for (auto& w : workers_) {
    w->out.close_all();
    w->err.close_all();
  }
  if (dedup_) dedup_->write(true, os_.now());
  // Whatever the workers started outside their groups and left behind was reparented to us
  // (a subreaper): end it, so that nothing outlives the attempt and no zombie is left; but
  // wait no longer than the kill bound, as for the workers themselves.
  const Clock::time_point bound = os_.now() + plan_.kill_timeout;
  for (;;) {
    std::vector<pid_t> left = os_.orphans();
    std::erase_if(left, [this](pid_t pid) {
      return std::any_of(workers_.begin(), workers_.end(),
                         [pid](const auto& w) { return w->unkillable && w->pid == pid; });
    });
    if (left.empty()) return;
    for (pid_t pid : left) os_.signal_process(pid, SIGKILL);
    while (std::optional<pid_t> pid = os_.exited_child()) os_.reap(*pid);
    if (os_.now() >= bound) {
      listener_.notice(std::to_string(left.size()) +
                       " process(es) the workers left behind did not end after SIGKILL; "
                       "not waiting for them");
      return;
    }
    std::vector<pollfd> none;
    os_.wait(none, std::min(bound, os_.now() + std::chrono::milliseconds(100)));
  }
}

}  // namespace acc::launcher
