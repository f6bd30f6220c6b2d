#pragma once

// One attempt's workers on this node: starts them (environment, CPUs, output streams) and
// stops the group on the first failure (SIGTERM, then SIGKILL after --shutdown_timeout). The
// Supervisor (process/supervisor.h) under it waits, routes their output, reaps each exit the
// moment it happens and gives up on a worker that SIGKILL does not end within --kill_timeout.
// Knows nothing of restarts, membership or hang reports: the agent decides those and hears from
// the group through a Listener. Not thread-safe: the agent's one thread owns it.

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "acc/launcher/agent/failure_report.h"
#include "acc/launcher/plan/plan.h"
#include "agent/standbys.h"
#include "agent/terminal_input.h"
#include "output/deduped_console.h"
#include "process/os.h"
#include "process/supervisor.h"

namespace acc::launcher {

// A worker: a Child of the supervisor (pid, running, unkillable, status, out, err) and what
// the agent keeps of it.
struct Worker : Child {
  WorkerSpec spec;
  int rank = 0;
  std::chrono::system_clock::time_point exit_time;  // formatted only for a failure report
  bool signalled_by_launcher = false;
  std::string dir;
  std::deque<std::string> stderr_tail;

  bool failed() const;
  // exit_time as local time to the millisecond: 2026-11-27 16:05:01.123.
  std::string exit_time_text() const;
};

class WorkerGroup : private Supervisor::Listener {
 public:
  using Clock = Os::Clock;

  class Listener {
   public:
    virtual ~Listener() = default;
    // A taken signal other than SIGCHLD reached the launcher.
    virtual void on_signal(int sig) = 0;
    // Worker `index` wrote a line.
    virtual void on_progress(int index) = 0;
    // A one-line message for the user (the agent's notice()).
    virtual void notice(const std::string& message) = 0;
    // A descriptor given to watch() is readable.
    virtual void on_readable(int fd) { (void)fd; }
  };

  // `attempt_dir` gets one directory per worker (logs, error.json).
  WorkerGroup(Os& os, const LaunchPlan& plan, const Round& round,
              const std::map<std::string, std::string>& environment, std::string attempt_dir,
              std::string python_hook_dir, Listener& listener);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Starts every worker and waits until each has exec'd: through its local rank's standby where
  // `standbys` has one that fits (standbys.h), else cold (with one line saying why, where it had
  // one) in a standby started for it at once (Standbys::start_now), which leaves an heir. Throws
  // LaunchError (after killing and reaping those that started, within the kill bound) when one
  // cannot run.
  void start(Standbys* standbys = nullptr);
  // Whether a worker still runs (one given up on as unkillable no longer counts).
  bool running() const;
  // Waits for the next event, at most until `wake` (none: no limit beyond the group's own
  // deadlines), and handles it: output, exits, signals (to the listener), the SIGKILL deadline
  // and the kill bound. Throws SystemError.
  void wait_once(std::optional<Clock::time_point> wake);
  // Adds a descriptor of the listener's (the file timer's pipe) to the wait: on_readable(fd)
  // when it can be read. The caller keeps it open while the group lives.
  void watch(int fd) { supervisor_.watch(fd); }
  void unwatch(int fd) { supervisor_.unwatch(fd); }
  // Stops the group: `sig` to every running worker's group now, SIGKILL at the deadline.
  void stop(int sig);
  // SIGKILL to every running worker's group now.
  void kill();
  // Sends `sig` to every running worker's group.
  void signal_all(int sig);
  // Drains and closes the output, then ends what the workers left behind (reparented to us),
  // waiting at most --kill_timeout for it.
  void finish();

  bool stopping() const { return supervisor_.stopping(); }
  const Worker* root_cause() const { return root_cause_; }
  std::vector<const Worker*> unkillable() const;
  const std::vector<std::unique_ptr<Worker>>& workers() const { return workers_; }
  std::vector<bool> running_workers() const;
  // Whether a worker's output went to a file the user must see (--redirects, --tee).
  bool keeps_logs() const { return keeps_logs_; }
  // The launcher's terminal changed its size (SIGWINCH): the workers' terminals take it.
  void resize_terminals();

 private:
  SpawnedProcess start_worker(const WorkerSpec& spec, Standbys* standbys);
  void setup_stream(Worker& worker, Stream& stream, int which, const std::string& prefix,
                    int console, const char* file_name);
  void start_dedup();
  // The launcher's terminal for a worker's stream (docs/launch.md, "In a terminal"): the stream
  // reads a terminal of its own where the launcher's console stream is one.
  void use_terminals(Worker& worker, SpawnRequest& request);
  void watch_terminal_input();
  std::optional<Clock::time_point> partial_lines_due() const;
  // The starts of lines held back past their wait (all: every one) to the console.
  void show_partial_lines(bool all);
  // Reads all that the worker of `rank` has written so far and shows it, a line's start too.
  void show_all_output_of(int rank);

  // --- Supervisor::Listener
  void on_signal(int sig) override { listener_.on_signal(sig); }
  void on_exit(Child& child) override;
  void notice(const std::string& message) override { listener_.notice(message); }
  void on_output(bool last) override;
  void on_readable(int fd) override;

  Os& os_;
  const LaunchPlan& plan_;
  Round round_;
  const std::map<std::string, std::string>& environment_;
  std::string attempt_dir_;
  std::string python_hook_dir_;
  Listener& listener_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<DedupedConsole> dedup_;
  Worker* root_cause_ = nullptr;
  bool keeps_logs_ = false;
  // The launcher's stdout and stderr where they are terminals: their sizes.
  std::optional<winsize> stdout_terminal_;
  std::optional<winsize> stderr_terminal_;
  std::optional<TerminalInput> input_;  // where the launcher's stdin is a terminal
  int watched_input_ = -1;              // the terminal while the supervisor watches it
  Supervisor supervisor_;
};

}  // namespace acc::launcher
