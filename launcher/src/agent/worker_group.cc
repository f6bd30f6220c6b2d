#include "agent/worker_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
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
#include "agent/worker_environment.h"
#include "hangs/python_stack_hook.h"
#include "output/console.h"

namespace acc::launcher {
namespace fs = std::filesystem;

std::string Worker::exit_time_text() const {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(exit_time);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(exit_time.time_since_epoch()).count() %
      1000;
  std::tm local{};
  ::localtime_r(&seconds, &local);
  char text[64];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &local);
  char with_millis[80];
  std::snprintf(with_millis, sizeof(with_millis), "%s.%03d", text, static_cast<int>(millis));
  return with_millis;
}

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
      listener_(listener),
      supervisor_(os, *this, "workers", plan.kill_timeout) {
  start_dedup();
  stdout_terminal_ = os_.terminal_size(STDOUT_FILENO);
  stderr_terminal_ = os_.terminal_size(STDERR_FILENO);
  if (os_.terminal_size(STDIN_FILENO))
    input_.emplace(os_, STDIN_FILENO, [this](int rank) { show_all_output_of(rank); });
}

WorkerGroup::~WorkerGroup() = default;

void WorkerGroup::start(Standbys* standbys) {
  try {
    std::vector<SpawnedProcess> started;
    for (const WorkerSpec& spec : plan_.workers) started.push_back(start_worker(spec, standbys));
    for (SpawnedProcess& process : started) os_.await_exec(process);
  } catch (...) {
    kill();
    while (running()) wait_once(std::nullopt);  // with the --dedup_lines wakes
    finish();
    throw;
  }
}

SpawnedProcess WorkerGroup::start_worker(const WorkerSpec& spec, Standbys* standbys) {
  auto worker = std::make_unique<Worker>();
  worker->spec = spec;
  worker->rank = global_rank(plan_, round_, spec.local_rank);
  worker->dir = attempt_dir_ + "/" + std::to_string(spec.local_rank);
  // One mkdir once the attempt's directory is there (the first worker makes it).
  if (::mkdir(worker->dir.c_str(), 0777) != 0) fs::create_directories(worker->dir);
  // The worker's progress file exists before it starts, so that its first write needs no
  // setup and the stall watch can map it at once (a sparse 64 KiB file: one create, one write).
  progress_file::create(progress_file_path(worker->dir));

  const std::vector<int> cpus = spec.local_rank < static_cast<int>(plan_.worker_cpus.size())
                                    ? plan_.worker_cpus[spec.local_rank]
                                    : std::vector<int>{};
  const std::map<std::string, std::string> env = worker_environment(
      plan_, spec, round_, environment_,
      {fs::path(attempt_dir_).parent_path().string(), worker->dir, python_hook_dir_});
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
  use_terminals(*worker, request);
  UniqueFd stdin_pipe;
  if (input_) {
    stdin_pipe = input_->add_worker(worker->rank);
    request.stdin_fd = stdin_pipe.get();
  }

  SpawnedProcess process;
  std::optional<Standbys::Taken> standby;
  if (standbys) {
    std::string why;
    standby = standbys->take(spec.local_rank, env, why);
    if (!why.empty())
      listener_.notice("warm workers: local rank " + std::to_string(spec.local_rank) +
                       " starts cold: " + why);
    // With no standby ready, the worker starts as one handed its worker at once, so that it too
    // leaves an heir for the next attempt.
    if (!standby) standby = standbys->start_now(spec, env);
  }
  if (standby) {
    try {
      process = supervisor_.hand_over(*worker, request, standby->pid, standby->channel.get());
      standbys->handed_over(spec.local_rank, std::move(*standby));
    } catch (const SystemError& e) {
      listener_.notice("warm workers: local rank " + std::to_string(spec.local_rank) +
                       " starts without a standby: " + e.what());
      standbys->end(*standby);
      standby.reset();
    }
  }
  if (!standby) process = supervisor_.spawn(*worker, std::move(request), search_path);
  if (input_) input_->started(worker->rank, process.pid);
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
  stream.clock = &os_;
  stream.dedup = stream.console_fd < 0 || !dedup_ ? nullptr : dedup_->for_console(console);
  if (stream.dedup) stream.dedup->add_source(local_rank);
  if (redirected || teed || !plan_.log_dir.empty()) {
    const std::string path = worker.dir + "/" + file_name;
    stream.file_fd.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    ACC_CHECK(stream.file_fd, SystemError, "cannot write ", path, ": ", std::strerror(errno));
    if (redirected || teed) keeps_logs_ = true;
  }
}

void WorkerGroup::use_terminals(Worker& worker, SpawnRequest& request) {
  if (request.capture_stdout && worker.out.console_fd >= 0 && stdout_terminal_) {
    request.stdout_terminal = stdout_terminal_;
    worker.out.terminal = true;
  }
  if (request.capture_stderr && worker.err.console_fd >= 0 && stderr_terminal_) {
    request.stderr_terminal = stderr_terminal_;
    worker.err.terminal = true;
  }
}

void WorkerGroup::resize_terminals() {
  stdout_terminal_ = os_.terminal_size(STDOUT_FILENO);
  stderr_terminal_ = os_.terminal_size(STDERR_FILENO);
  for (const auto& w : workers_) {
    if (w->out.terminal && w->out.fd && stdout_terminal_)
      os_.resize_terminal(w->out.fd.get(), *stdout_terminal_);
    if (w->err.terminal && w->err.fd && stderr_terminal_)
      os_.resize_terminal(w->err.fd.get(), *stderr_terminal_);
  }
}

// The terminal is read only while the launcher is in its foreground.
void WorkerGroup::watch_terminal_input() {
  const int fd = input_ ? input_->fd_to_watch() : -1;
  if (fd == watched_input_) return;
  if (watched_input_ >= 0) supervisor_.unwatch(watched_input_);
  if (fd >= 0) supervisor_.watch(fd);
  watched_input_ = fd;
}

void WorkerGroup::on_readable(int fd) {
  if (input_ && fd == watched_input_) {
    // What is typed answers the prompts shown so far: those still held back show first, so that
    // a rank's answer cannot join its prompt's line.
    show_partial_lines(/*all=*/true);
    input_->on_readable();
  } else {
    listener_.on_readable(fd);
  }
}

std::optional<WorkerGroup::Clock::time_point> WorkerGroup::partial_lines_due() const {
  std::optional<Clock::time_point> due;
  for (const auto& w : workers_)
    for (const Stream* stream : {&w->out, &w->err})
      if (stream->partial_due && (!due || *stream->partial_due < *due)) due = stream->partial_due;
  return due;
}

void WorkerGroup::show_all_output_of(int rank) {
  for (const auto& w : workers_) {
    if (w->rank != rank) continue;
    for (Stream* stream : {&w->out, &w->err}) {
      if (!stream->fd) continue;
      while (stream->read_some() == Stream::Read::kData) {
      }
      if (stream->partial_due) stream->show_partial();
    }
  }
}

void WorkerGroup::show_partial_lines(bool all) {
  const Clock::time_point now = os_.now();
  for (const auto& w : workers_)
    for (Stream* stream : {&w->out, &w->err})
      if (stream->partial_due && (all || *stream->partial_due <= now)) stream->show_partial();
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
  return supervisor_.running();
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
  watch_terminal_input();
  for (auto due : {dedup_ ? dedup_->next_due() : std::nullopt, partial_lines_due(),
                   input_ ? input_->next_look() : std::nullopt})
    if (due) wake = wake ? std::min(*wake, *due) : *due;
  supervisor_.wait_once(wake);
  show_partial_lines(/*all=*/false);
  if (input_ && input_->holds_input()) {
    show_partial_lines(/*all=*/true);
    input_->look();
  }
}

void WorkerGroup::on_output(bool last) {
  if (dedup_) dedup_->write(last, os_.now());
}

void WorkerGroup::on_exit(Child& child) {
  Worker& worker = static_cast<Worker&>(child);
  worker.exit_time = os_.wall_now();
  if (worker.failed() && !stopping()) {
    root_cause_ = &worker;
    stop(SIGTERM);
  }
}

void WorkerGroup::stop(int sig) {
  supervisor_.kill_at(os_.now() + plan_.shutdown_timeout,
                      "workers still running " + decimal_seconds(plan_.shutdown_timeout) +
                          " s after the stop signal; sending SIGKILL");
  signal_all(sig);
  for (auto& w : workers_)
    if (w->running) w->signalled_by_launcher = true;
}

void WorkerGroup::kill() {
  supervisor_.kill();
}

void WorkerGroup::signal_all(int sig) {
  supervisor_.signal_all(sig);
}

void WorkerGroup::finish() {
  supervisor_.finish();
}

}  // namespace acc::launcher
