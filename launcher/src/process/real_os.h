#pragma once

// The Os of the machine: vfork/exec (spawn.h), posix_spawn and exec (programs.h), kill,
// waitid/waitpid, signalfd and poll, /proc (proc.h), the machine's clock, and the watchdog
// (watchdog.h) that kills the workers' groups should the launcher itself be killed.

#include <map>
#include <memory>
#include <set>

#include "acc/common/unique_fd.h"
#include "process/os.h"

namespace acc::launcher {

class Watchdog;

class RealOs : public Os {
 public:
  RealOs();
  ~RealOs() override;

  void take_signals(const std::vector<int>& signals) override;
  SpawnedProcess spawn(SpawnRequest request, const std::string& path) override;
  void await_exec(SpawnedProcess& process) override;
  // Standbys hand their workers over through a child the launcher adopts: as the subreaper only.
  bool can_keep_standbys() const override { return subreaper_; }
  SpawnedProcess hand_over(SpawnRequest request, pid_t standby, int channel) override;
  void adopt_standby(pid_t pid) override;
  void forget(pid_t process_group) override;
  void dismiss_watchdog() override;
  void signal_group(pid_t process_group, int sig) override;
  bool signal_process(pid_t pid, int sig) override;
  std::optional<pid_t> exited_child() override;
  int reap(pid_t pid, long* peak_rss_kib = nullptr) override;
  std::vector<pid_t> orphans() override;
  ProcessState process_state(pid_t pid) override;
  proc::Reader& proc() override;
  std::string find_program(const std::string& program) override;
  pid_t start_program(const std::vector<std::string>& argv,
                      const std::string& stdout_path) override;
  int run_program(const std::vector<std::string>& argv) override;
  std::optional<std::string> program_output(const std::vector<std::string>& argv) override;
  std::optional<int> exit_status(pid_t pid) override;
  void replace_with(const std::string& executable, const std::vector<std::string>& argv) override;
  // The clock is the machine's one (rendezvous::Clock::steady()).
  time_point now() const override;
  wall_time_point wall_now() const override;
  void sleep_until(time_point deadline) const override;
  std::vector<int> wait(std::vector<pollfd>& fds, std::optional<time_point> deadline) override;
  std::optional<winsize> terminal_size(int fd) override;
  bool in_foreground(int fd) override;
  void resize_terminal(int fd, const winsize& size) override;

 private:
  UniqueFd signal_fd_;
  std::unique_ptr<Watchdog> watchdog_;  // started by take_signals
  bool subreaper_ = false;              // the workers' orphans' reaper: set by take_signals
  // The child whose exit raised the SIGCHLD that wait() read: the first of all that exited
  // while the signal was pending (the kernel keeps the first sender of a pending signal).
  pid_t first_exited_ = 0;
  std::set<pid_t> standbys_;  // spawned with a channel, not handed a worker yet: no orphans
  // start_program's, running (no orphans), and the statuses of those that exited_child() found
  // ended and reaped, for exit_status().
  std::set<pid_t> programs_;
  std::map<pid_t, int> program_statuses_;
};

}  // namespace acc::launcher
