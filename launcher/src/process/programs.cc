#include "process/programs.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include "acc/common/error.h"
#include "acc/common/unique_fd.h"
#include "process/spawn.h"

extern char** environ;

namespace acc::launcher {
namespace {

// posix_spawn of argv[0] with no signal blocked; `redirect` adds the file actions. Returns its pid,
// or -1 with errno set.
pid_t spawn(const std::vector<std::string>& argv,
            const std::function<void(posix_spawn_file_actions_t&)>& redirect) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (redirect) redirect(actions);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args = c_strings(argv);
  pid_t pid = -1;
  const int error = ::posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (error == 0) return pid;
  errno = error;
  return -1;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

pid_t start_program(const std::vector<std::string>& argv, const std::string& stdout_path) {
  return spawn(argv, [&](posix_spawn_file_actions_t& actions) {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  });
}

int run_program(const std::vector<std::string>& argv) {
  const pid_t pid = spawn(argv, nullptr);
  ACC_CHECK(pid > 0, LaunchError, "cannot run ", argv[0], ": ", std::strerror(errno));
  return wait_for(pid);
}

std::optional<std::string> program_output(const std::vector<std::string>& argv) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) return std::nullopt;
  UniqueFd read_end(ends[0]);
  pid_t pid = -1;
  {
    const UniqueFd write_end(ends[1]);
    pid = spawn(argv, [&](posix_spawn_file_actions_t& actions) {
      posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
      posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
      posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    });
  }
  if (pid < 0) return std::nullopt;
  std::string output;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(read_end.get(), buffer, sizeof(buffer));
    if (got > 0) output.append(buffer, static_cast<size_t>(got));
    if (got == 0 || (got < 0 && errno != EINTR)) break;
  }
  wait_for(pid);
  return output;
}

std::optional<int> exit_status(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
  return status;
}

void replace_with(const std::string& executable, const std::vector<std::string>& argv) {
  std::vector<char*> args = c_strings(argv);
  ::execv(executable.c_str(), args.data());
  throw LaunchError("cannot run " + executable + ": " + std::strerror(errno));
}

}  // namespace acc::launcher
