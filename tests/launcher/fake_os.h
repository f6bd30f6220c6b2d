#pragma once

// An Os whose processes are scripted and whose clock moves only when its user waits or sleeps: a
// worker prints lines and exits with a code at a time, dies by a signal, ignores SIGTERM, or never
// dies even after SIGKILL; the launcher receives signals at set times; a program beside the
// workers (a debugger, scontrol) writes its output and exits at a time, or never; /proc is a
// FakeProc (fake_proc.h) the test sets. Output goes through real pipes (a program's into the real
// file it was given), so the agent's streams read it as they read a real worker's; nothing else is
// real. Time jumps straight to the next scripted event or the agent's deadline, so a test of a
// 30-second grace period takes no wall-clock time and has no window to miss.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "acc/common/error.h"
#include "acc/common/files.h"
#include "acc/common/unique_fd.h"
#include "fake_proc.h"
#include "process/os.h"

namespace acc::launcher::testing {

using std::chrono::milliseconds;

// What one worker does, times from its start.
struct Script {
  std::vector<std::pair<milliseconds, std::string>> stdout_lines;
  std::vector<std::pair<milliseconds, std::string>> stderr_lines;
  std::optional<milliseconds> exit_after;  // none: runs until a signal ends it
  int exit_code = 0;
  int killed_by = 0;              // at exit_after, dies by this signal instead of exiting
  bool ignores_sigterm = false;   // SIGTERM (and SIGINT) leave it running
  bool survives_sigkill = false;  // stuck in the kernel: nothing ends it
  std::string cannot_exec;        // await_exec throws LaunchError with this reason
  // Exits with this code when its stdin reaches its end (a remote launcher's ssh,
  // --stop_on_stdin_eof); none: the end of its stdin leaves it running.
  std::optional<int> exits_at_stdin_eof;
  // A program beside the workers (start_program, run_program, program_output): what it has
  // written to its stdout when it exits (not when it is killed).
  std::string output;
};

class FakeOs : public Os {
 public:
  struct Process {
    pid_t pid = 0;
    SpawnRequest request;
    Script script;
    Clock::time_point started;
    bool alive = true;
    bool reaped = false;
    int status = 0;                                           // as waitpid reports it, once dead
    std::vector<std::pair<int, Clock::time_point>> received;  // signals, with when
    UniqueFd out;  // write ends of the pipes the agent reads
    UniqueFd err;
    UniqueFd in;                                    // the stdin it was given, as a child keeps it
    std::optional<Clock::time_point> stdin_closed;  // when its stdin reached its end
    std::string output_path;                        // start_program's file for its stdout

    std::string env(const std::string& key) const {
      for (const std::string& entry : request.env)
        if (entry.compare(0, key.size() + 1, key + "=") == 0) return entry.substr(key.size() + 1);
      return "<unset>";
    }
    bool got(int sig) const {
      return std::any_of(received.begin(), received.end(),
                         [sig](const auto& r) { return r.first == sig; });
    }
    std::optional<Clock::time_point> when(int sig) const {
      for (const auto& [s, t] : received)
        if (s == sig) return t;
      return std::nullopt;
    }
  };

  // Decides each spawned worker's script: `index` counts spawns across attempts.
  // By default, every worker exits 0 at once.
  std::function<Script(const SpawnRequest& request, int index)> program = [](auto&, int) {
    Script script;
    script.exit_after = milliseconds(0);
    return script;
  };

  // Decides the script of each program started beside the workers (start_program, run_program,
  // program_output), from its argv. By default, it exits 0 at once, writing nothing.
  std::function<Script(const std::vector<std::string>& argv)> helper = [](auto&) {
    Script script;
    script.exit_after = milliseconds(0);
    return script;
  };
  // Where find_program finds a program: name -> path; one not here is not installed.
  std::map<std::string, std::string> installed;
  // The /proc of the processes the fake did not start (the workers of a stall watch's tests,
  // other launchers); signal_process reaches those it holds.
  FakeProc fake_proc;
  // Runs at each signal sent to a process the fake did not start, before signal_process returns.
  std::function<void(pid_t pid, int sig)> on_signal;
  std::vector<std::pair<pid_t, int>> signalled;  // (pid, signal) to processes it did not start
  std::vector<std::string> replaced_with;        // replace_with's argv

  // The launcher receives `sig` `after` the fake's start.
  void signal_launcher(milliseconds after, int sig) {
    launcher_signals_.push_back({start_ + after, sig});
  }

  Clock::time_point start() const { return start_; }
  milliseconds elapsed() const { return std::chrono::duration_cast<milliseconds>(now_ - start_); }
  const std::vector<std::unique_ptr<Process>>& processes() const { return processes_; }
  const std::vector<int>& taken_signals() const { return taken_; }

  // --- Os ----------------------------------------------------------------------------------

  void take_signals(const std::vector<int>& signals) override { taken_ = signals; }

  SpawnedProcess spawn(SpawnRequest request, const std::string&) override {
    auto p = std::make_unique<Process>();
    p->pid = 1000 + static_cast<pid_t>(processes_.size());
    p->script = program(request, static_cast<int>(processes_.size()));
    p->started = now_;
    SpawnedProcess spawned;
    spawned.pid = p->pid;
    spawned.name = request.argv.front();
    if (request.capture_stdout) spawned.stdout_fd = open_pipe(p->out);
    if (request.capture_stderr) spawned.stderr_fd = open_pipe(p->err);
    if (request.stdin_fd >= 0) p->in.reset(::fcntl(request.stdin_fd, F_DUPFD_CLOEXEC, 0));
    p->request = std::move(request);
    processes_.push_back(std::move(p));
    return spawned;
  }

  void await_exec(SpawnedProcess& spawned) override {
    Process& p = find(spawned.pid);
    if (p.script.cannot_exec.empty()) return;
    die(p, 127 << 8);
    throw LaunchError("cannot run " + spawned.name + ": " + p.script.cannot_exec);
  }

  void forget(pid_t) override {}

  void signal_group(pid_t group, int sig) override { signal_process(group, sig); }

  bool signal_process(pid_t pid, int sig) override {
    if (!started(pid)) {
      const bool exists = fake_proc.owner(pid) >= 0;
      signalled.push_back({pid, sig});
      if (on_signal) on_signal(pid, sig);
      return exists;
    }
    Process& p = find(pid);
    if (!p.alive) return false;
    p.received.push_back({sig, now_});
    if (sig == SIGKILL && !p.script.survives_sigkill) die(p, SIGKILL);
    if ((sig == SIGTERM || sig == SIGINT) && !p.script.ignores_sigterm) die(p, sig);
    return true;
  }

  std::optional<pid_t> exited_child() override {
    for (auto& p : processes_)
      if (!p->alive && !p->reaped) return p->pid;
    return std::nullopt;
  }

  int reap(pid_t pid, long* peak_rss_kib = nullptr) override {
    if (peak_rss_kib) *peak_rss_kib = -1;
    Process& p = find(pid);
    if (p.alive || p.reaped) throw std::logic_error("fake: reap of a child that has not exited");
    p.reaped = true;
    return p.status;
  }

  std::vector<pid_t> orphans() override { return {}; }

  ProcessState process_state(pid_t pid) override {
    const Process& p = find(pid);
    if (!p.alive) return {p.reaped ? '?' : 'Z', ""};
    if (p.script.survives_sigkill && p.got(SIGKILL)) return {'D', "nvidia_wait_for_fence"};
    return {'S', "do_epoll_wait"};
  }

  proc::Reader& proc() override { return fake_proc; }

  std::string find_program(const std::string& program) override {
    const auto found = installed.find(program);
    return found == installed.end() ? "" : found->second;
  }

  pid_t start_program(const std::vector<std::string>& argv,
                      const std::string& stdout_path) override {
    Process* p = start_helper(argv);
    if (!p) return -1;
    p->output_path = stdout_path;
    write_file(stdout_path, "");
    return p->pid;
  }

  int run_program(const std::vector<std::string>& argv) override {
    Process* p = start_helper(argv);
    if (!p) throw LaunchError("cannot run " + argv.front() + ": " + helper(argv).cannot_exec);
    run_to_exit(*p);
    return p->status;
  }

  std::optional<std::string> program_output(const std::vector<std::string>& argv) override {
    Process* p = start_helper(argv);
    if (!p) return std::nullopt;
    run_to_exit(*p);
    return p->script.output;
  }

  std::optional<int> exit_status(pid_t pid) override {
    settle();
    Process& p = find(pid);
    if (p.alive || p.reaped) return std::nullopt;
    p.reaped = true;
    return p.status;
  }

  void replace_with(const std::string& executable, const std::vector<std::string>& argv) override {
    replaced_with = argv;
    throw LaunchError("fake: the launcher would be " + executable + " now");
  }

  time_point now() const override { return now_; }
  // A date that moves as now() does, from an arbitrary start.
  wall_time_point wall_now() const override {
    return wall_time_point(std::chrono::seconds(1'800'000'000)) + (now_ - start_);
  }
  // Moves the time to `deadline` at once: a sleep takes no wall-clock time.
  void sleep_until(time_point deadline) const override { now_ = std::max(now_, deadline); }

  // Delivers what is due; returns when a pipe is ready or a signal is pending, else jumps the
  // clock to the next scripted event or `deadline`. With neither, the agent would wait forever
  // on a real machine too: that is a failure, not a hang.
  std::vector<int> wait(std::vector<pollfd>& fds,
                        std::optional<Clock::time_point> deadline) override {
    for (;;) {
      settle();
      for (pollfd& fd : fds) fd.revents = 0;
      const int ready = ::poll(fds.data(), fds.size(), 0);
      if (ready > 0 || !pending_.empty() || (deadline && now_ >= *deadline))
        return std::exchange(pending_, {});
      std::optional<Clock::time_point> next = next_event();
      if (deadline) next = next ? std::min(*next, *deadline) : *deadline;
      if (!next) throw std::logic_error("fake: the agent waits with nothing left to happen");
      now_ = std::max(now_, *next);
    }
  }

 private:
  static int open_pipe(UniqueFd& write_end) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("fake: pipe2");
    write_end.reset(fds[1]);
    return fds[0];
  }

  bool started(pid_t pid) const {
    return std::any_of(processes_.begin(), processes_.end(),
                       [pid](const auto& p) { return p->pid == pid; });
  }

  // A program beside the workers, started now; null when its script says it cannot start.
  Process* start_helper(const std::vector<std::string>& argv) {
    Script script = helper(argv);
    if (!script.cannot_exec.empty()) return nullptr;
    auto p = std::make_unique<Process>();
    p->pid = 1000 + static_cast<pid_t>(processes_.size());
    p->request.argv = argv;
    p->script = std::move(script);
    p->started = now_;
    processes_.push_back(std::move(p));
    return processes_.back().get();
  }

  // Time moves on until `p` exits, as the launcher waits for it; reaps it.
  void run_to_exit(Process& p) {
    for (settle(); p.alive; settle()) {
      const std::optional<Clock::time_point> next = next_event();
      if (!next) throw std::logic_error("fake: a program runs that never ends");
      now_ = std::max(now_, *next);
    }
    p.reaped = true;
  }

  static void write_file(const std::string& path, const std::string& text) {
    if (acc::write_file(path, text) != 0) throw std::runtime_error("fake: cannot write " + path);
  }

  Process& find(pid_t pid) const {
    for (auto& p : processes_)
      if (p->pid == pid) return *p;
    throw std::logic_error("fake: no process " + std::to_string(pid));
  }

  void die(Process& p, int status) {
    p.alive = false;
    p.status = status;
    p.out.reset();
    p.err.reset();
    p.in.reset();
    pending_.push_back(SIGCHLD);
  }

  // Writes the lines that are due, ends the workers whose time has come, and raises the
  // launcher's signals that are due.
  void settle() {
    for (auto& p : processes_) {
      if (!p->alive) continue;
      write_due(*p, p->script.stdout_lines, p->out);
      write_due(*p, p->script.stderr_lines, p->err);
      if (!p->stdin_closed && at_end(p->in)) {
        p->stdin_closed = now_;
        if (p->script.exits_at_stdin_eof) die(*p, *p->script.exits_at_stdin_eof << 8);
        if (!p->alive) continue;
      }
      if (p->script.exit_after && now_ >= p->started + *p->script.exit_after) {
        if (!p->output_path.empty() && !p->script.killed_by)
          write_file(p->output_path, p->script.output);
        die(*p, p->script.killed_by ? p->script.killed_by : p->script.exit_code << 8);
      }
    }
    for (auto it = launcher_signals_.begin(); it != launcher_signals_.end();) {
      if (it->first > now_) {
        ++it;
        continue;
      }
      pending_.push_back(it->second);
      it = launcher_signals_.erase(it);
    }
  }

  // Whether the other end of a pipe the fake reads is closed (nothing is ever written to it).
  static bool at_end(const UniqueFd& fd) {
    if (!fd) return false;
    pollfd ready{fd.get(), POLLIN, 0};
    return ::poll(&ready, 1, 0) > 0 && (ready.revents & (POLLIN | POLLHUP));
  }

  void write_due(Process& p, std::vector<std::pair<milliseconds, std::string>>& lines,
                 const UniqueFd& fd) {
    for (auto it = lines.begin(); it != lines.end();) {
      if (p.started + it->first > now_) {
        ++it;
        continue;
      }
      if (fd) (void)!::write(fd.get(), it->second.data(), it->second.size());
      it = lines.erase(it);
    }
  }

  std::optional<Clock::time_point> next_event() const {
    std::optional<Clock::time_point> next;
    auto consider = [&next](Clock::time_point t) { next = next ? std::min(*next, t) : t; };
    for (const auto& p : processes_) {
      if (!p->alive) continue;
      for (const auto& line : p->script.stdout_lines) consider(p->started + line.first);
      for (const auto& line : p->script.stderr_lines) consider(p->started + line.first);
      if (p->script.exit_after) consider(p->started + *p->script.exit_after);
    }
    for (const auto& [t, sig] : launcher_signals_) consider(t);
    return next;
  }

  // Far from zero, as a steady clock is, so that no deadline arithmetic goes below it.
  Clock::time_point start_ = Clock::time_point(std::chrono::hours(1000));
  mutable Clock::time_point now_ = start_;  // mutable for sleep_until, const as the Clock's
  std::vector<std::unique_ptr<Process>> processes_;
  std::vector<std::pair<Clock::time_point, int>> launcher_signals_;
  std::vector<int> pending_;
  std::vector<int> taken_;
};

}  // namespace acc::launcher::testing
