#include "process/real_os.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "acc/common/error.h"
#include "acc/common/strings.h"
#include "output/log.h"
#include "process/proc.h"
#include "process/programs.h"
#include "process/watchdog.h"

namespace acc::launcher {

RealOs::RealOs() = default;
RealOs::~RealOs() = default;

void RealOs::take_signals(const std::vector<int>& signals) {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  for (int s : signals) sigaddset(&mask, s);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal_fd_.reset(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  ACC_CHECK(signal_fd_, SystemError, "signalfd: ", std::strerror(errno));
  ::signal(SIGPIPE, SIG_IGN);
  // Orphaned grandchildren of the workers come to us, so none outlives the job unreaped, and so
  // does a standby's heir (agent/standbys.h).
  subreaper_ = ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  // Started now, while the launcher has one thread (the store's may start at the first join):
  // where the watchdog is a fork, it then copies no other thread's half-done state.
  watchdog_ = std::make_unique<Watchdog>();
  // What an emulator refuses (qemu-user both), and what the launcher does without it: one line.
  std::vector<std::string> refused;
  std::vector<std::string> instead;
  if (!subreaper_) {
    refused.push_back("prctl(PR_SET_CHILD_SUBREAPER)");
    instead.push_back("no warm workers, init reaps what a worker leaves running");
  }
  if (watchdog_->clone_refused()) {
    refused.push_back("clone(CLONE_VM)");
    instead.push_back("the watchdog is a forked process");
  }
  if (!refused.empty())
    log::info("this system refuses " + acc::join(refused, " and ") +
              " (as qemu-user does): " + acc::join(instead, "; "));
}

SpawnedProcess RealOs::spawn(SpawnRequest request, const std::string& path) {
  request.executable = resolve_executable(request.argv.front(), path);
  SpawnedProcess process = spawn_process(request);
  if (watchdog_) watchdog_->watch(process.pid);
  if (request.channel_fd >= 0 && process.exec_error == 0) standbys_.insert(process.pid);
  return process;
}

SpawnedProcess RealOs::hand_over(SpawnRequest request, pid_t standby, int channel) {
  SpawnedProcess process = acc::launcher::hand_over(request, standby, channel);
  standbys_.erase(standby);
  return process;
}

std::optional<winsize> RealOs::terminal_size(int fd) {
  winsize size{};
  if (!::isatty(fd) || ::ioctl(fd, TIOCGWINSZ, &size) != 0) return std::nullopt;
  return size;
}

bool RealOs::in_foreground(int fd) {
  const pid_t foreground = ::tcgetpgrp(fd);
  return foreground > 0 && foreground == ::getpgrp();
}

void RealOs::resize_terminal(int fd, const winsize& size) {
  ::ioctl(fd, TIOCSWINSZ, &size);
}

void RealOs::await_exec(SpawnedProcess& process) {
  acc::launcher::await_exec(process);
}

void RealOs::adopt_standby(pid_t pid) {
  standbys_.insert(pid);
  if (watchdog_) watchdog_->watch(pid);
}

void RealOs::forget(pid_t process_group) {
  standbys_.erase(process_group);
  if (watchdog_) watchdog_->forget(process_group);
}

void RealOs::dismiss_watchdog() {
  if (watchdog_) watchdog_->dismiss();
}

void RealOs::signal_group(pid_t process_group, int sig) {
  ::kill(-process_group, sig);
}

bool RealOs::signal_process(pid_t pid, int sig) {
  return ::kill(pid, sig) == 0;
}

std::optional<pid_t> RealOs::exited_child() {
  siginfo_t info{};
  // waitid(P_ALL) finds the oldest child first, not the first to exit: rank 1, failing a
  // millisecond after rank 2 on the connection rank 2's exit closed, would be the root cause.
  if (const pid_t first = std::exchange(first_exited_, 0); first > 0 && !programs_.count(first))
    if (::waitid(P_PID, static_cast<id_t>(first), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == first)
      return first;
  for (;;) {
    info = {};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0)
      return std::nullopt;
    if (!programs_.count(info.si_pid)) return info.si_pid;
    // One of start_program's, never a worker's: its caller asks exit_status() for it.
    programs_.erase(info.si_pid);
    program_statuses_[info.si_pid] = reap(info.si_pid);
  }
}

int RealOs::reap(pid_t pid, long* peak_rss_kib) {
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  if (peak_rss_kib) *peak_rss_kib = usage.ru_maxrss;
  return status;
}

std::vector<pid_t> RealOs::orphans() {
  std::vector<pid_t> children;
  for (pid_t pid : proc::children(::getpid()))
    if ((!watchdog_ || pid != watchdog_->pid()) && !standbys_.count(pid) && !programs_.count(pid))
      children.push_back(pid);
  return children;
}

Os::ProcessState RealOs::process_state(pid_t pid) {
  ProcessState result;
  const proc::Stat stat = proc::stat(pid);
  if (stat.ok) result.state = stat.state[0];
  result.wchan = proc::read(pid, "wchan");
  while (!result.wchan.empty() && result.wchan.back() == '\n') result.wchan.pop_back();
  if (result.wchan == "0") result.wchan.clear();
  return result;
}

proc::Reader& RealOs::proc() {
  return proc::Reader::machine();
}

std::string RealOs::find_program(const std::string& program) {
  const char* path = std::getenv("PATH");
  try {
    return resolve_executable(program, path ? path : "/usr/bin:/bin");
  } catch (const LaunchError&) {
    return "";
  }
}

pid_t RealOs::start_program(const std::vector<std::string>& argv, const std::string& stdout_path) {
  const pid_t pid = acc::launcher::start_program(argv, stdout_path);
  if (pid > 0) programs_.insert(pid);
  return pid;
}

int RealOs::run_program(const std::vector<std::string>& argv) {
  return acc::launcher::run_program(argv);
}

std::optional<std::string> RealOs::program_output(const std::vector<std::string>& argv) {
  return acc::launcher::program_output(argv);
}

std::optional<int> RealOs::exit_status(pid_t pid) {
  if (const auto found = program_statuses_.find(pid); found != program_statuses_.end()) {
    const int status = found->second;
    program_statuses_.erase(found);
    return status;
  }
  const std::optional<int> status = acc::launcher::exit_status(pid);
  if (status) programs_.erase(pid);
  return status;
}

void RealOs::replace_with(const std::string& executable, const std::vector<std::string>& argv) {
  acc::launcher::replace_with(executable, argv);
}

Os::time_point RealOs::now() const {
  return Clock::steady().now();
}

Os::wall_time_point RealOs::wall_now() const {
  return Clock::steady().wall_now();
}

void RealOs::sleep_until(time_point deadline) const {
  Clock::steady().sleep_until(deadline);
}

std::vector<int> RealOs::wait(std::vector<pollfd>& fds, std::optional<time_point> deadline) {
  std::vector<pollfd> all{{signal_fd_.get(), POLLIN, 0}};
  all.insert(all.end(), fds.begin(), fds.end());
  int timeout = -1;
  if (deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now());
    // Rounded up, so that a wake for a deadline never comes just before it.
    timeout = static_cast<int>(std::max<int64_t>(0, left.count() + (*deadline > now())));
  }
  const int ready = ::poll(all.data(), all.size(), timeout);
  if (ready < 0 && errno != EINTR) throw SystemError(std::string("poll: ") + strerror(errno));
  std::copy(all.begin() + 1, all.end(), fds.begin());
  std::vector<int> signals;
  if (!(all[0].revents & POLLIN)) return signals;
  signalfd_siginfo info{};
  while (::read(signal_fd_.get(), &info, sizeof(info)) == sizeof(info)) {
    signals.push_back(static_cast<int>(info.ssi_signo));
    if (info.ssi_signo == SIGCHLD && first_exited_ == 0)
      first_exited_ = static_cast<pid_t>(info.ssi_pid);
  }
  return signals;
}

}  // namespace acc::launcher
