#include "process/watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <utility>

#include "acc/common/unique_fd.h"

namespace acc::launcher {
namespace {

constexpr int kJobEnded = 0;

// Runs in the forked child: reads group ids (negative: forget), and on end of file, which only
// a dead launcher produces, kills every group still listed.
[[noreturn]] void watch_loop(int pipe) {
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) ::signal(s, SIG_IGN);
  // Holds no one's terminal or pipe open.
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) ::dup2(null, fd);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  std::set<pid_t> groups;
  for (;;) {
    int value = 0;
    const ssize_t got = ::read(pipe, &value, sizeof(value));
    if (got < 0 && errno == EINTR) continue;
    if (got == sizeof(value) && value == kJobEnded) ::_exit(0);
    if (got != sizeof(value)) break;
    if (value > 0) groups.insert(value);
    if (value < 0) groups.erase(-value);
  }
  for (pid_t group : groups) ::kill(-group, SIGKILL);
  ::_exit(0);
}

}  // namespace

Watchdog::Watchdog() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;  // no watchdog: PDEATHSIG still covers workers
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  pid_ = ::fork();
  if (pid_ == 0) {
    write_end.reset();
    watch_loop(read_end.get());
  }
  if (pid_ >= 0) pipe_ = std::move(write_end);
}

Watchdog::~Watchdog() {
  if (!pipe_) return;
  send(kJobEnded);
  pipe_.reset();
  ::waitpid(pid_, nullptr, 0);
}

void Watchdog::watch(pid_t process_group) {
  send(process_group);
}
void Watchdog::forget(pid_t process_group) {
  send(-process_group);
}

void Watchdog::send(int value) {
  if (pipe_) (void)!::write(pipe_.get(), &value, sizeof(value));
}

}  // namespace acc::launcher
