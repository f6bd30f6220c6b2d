// spawn_process and its neighbours (launcher/src/process/spawn.cc) on real processes: a child in
// a process group of its own with exactly the environment asked, its output on non-blocking
// pipes or on terminals of its own, its stdin and CPUs as asked; a program that cannot run named
// in one LaunchError; PATH searched as execvp searches it.

#include "process/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "acc/common/error.h"

namespace acc::launcher {
namespace {

SpawnRequest shell(const std::string& script, std::vector<std::string> env = {}) {
  SpawnRequest request;
  request.executable = "/bin/sh";
  request.argv = {"sh", "-c", script};
  env.push_back("PATH=/usr/bin:/bin");
  request.env = std::move(env);
  return request;
}

// Everything `fd` (non-blocking) gives until its end, then closes it.
std::string read_to_end(int fd) {
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<std::size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10'000) <= 0) break;  // nothing for 10 s: give up
    } else {
      break;  // end of file, or EIO: a terminal whose other side is closed
    }
  }
  ::close(fd);
  return text;
}

int exit_status_of(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(SpawnTest, AChildLeadsItsGroupWithTheEnvironmentAskedAndItsOutputOnPipes) {
  ::setenv("ACC_SPAWN_TEST_INHERITED", "leaked", 1);
  SpawnedProcess child = spawn_process(
      shell("echo \"$GREETING ${ACC_SPAWN_TEST_INHERITED:-none}\"; echo oops >&2; exit 3",
            {"GREETING=hello"}));
  ::unsetenv("ACC_SPAWN_TEST_INHERITED");
  EXPECT_NO_THROW(await_exec(child));
  EXPECT_EQ(child.name, "sh");
  ASSERT_GE(child.stdout_fd, 0);
  ASSERT_GE(child.stderr_fd, 0);
  EXPECT_TRUE(::fcntl(child.stdout_fd, F_GETFL) & O_NONBLOCK);
  EXPECT_EQ(::getpgid(child.pid), child.pid) << "its own process group, led by it";
  EXPECT_EQ(read_to_end(child.stdout_fd), "hello none\n") << "only the environment asked";
  EXPECT_EQ(read_to_end(child.stderr_fd), "oops\n");
  EXPECT_EQ(exit_status_of(child.pid), 3);
}

TEST(SpawnTest, AProgramThatCannotRunIsOneLaunchErrorNamingItAndItsChildExits127) {
  SpawnRequest request = shell("");
  request.executable = "/nonexistent/program";
  request.argv = {"program"};
  SpawnedProcess child = spawn_process(request);
  try {
    await_exec(child);
    FAIL() << "a missing program ran";
  } catch (const LaunchError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot run program: No such file or directory");
  }
  if (child.stdout_fd >= 0) ::close(child.stdout_fd);
  if (child.stderr_fd >= 0) ::close(child.stderr_fd);
  EXPECT_EQ(exit_status_of(child.pid), 127);
}

TEST(SpawnTest, StdinAndUncapturedStreamsAreAsAsked) {
  int input[2];
  ASSERT_EQ(::pipe2(input, O_CLOEXEC), 0);
  SpawnRequest request = shell("cat; echo to-the-launchers-stderr >&2");
  request.stdin_fd = input[0];
  request.capture_stderr = false;
  SpawnedProcess child = spawn_process(request);
  ::close(input[0]);
  await_exec(child);
  EXPECT_EQ(child.stderr_fd, -1);
  ASSERT_EQ(::write(input[1], "typed\n", 6), 6);
  ::close(input[1]);
  EXPECT_EQ(read_to_end(child.stdout_fd), "typed\n");
  EXPECT_EQ(exit_status_of(child.pid), 0);
}

TEST(SpawnTest, ACapturedStreamMayBeATerminalOfItsOwnOfTheSizeAsked) {
  SpawnRequest request = shell("[ -t 1 ] && stty size <&1; [ -t 2 ] || echo pipe >&2");
  request.stdout_terminal = winsize{30, 100, 0, 0};
  SpawnedProcess child = spawn_process(request);
  await_exec(child);
  EXPECT_EQ(read_to_end(child.stdout_fd), "30 100\n") << "raw: no \\r added";
  EXPECT_EQ(read_to_end(child.stderr_fd), "pipe\n");
  EXPECT_EQ(exit_status_of(child.pid), 0);
}

TEST(SpawnTest, TheChildRunsOnTheCpusAsked) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &mine)) ++cpu;
  SpawnRequest request = shell("grep Cpus_allowed_list /proc/self/status");
  request.cpus = {cpu};
  SpawnedProcess child = spawn_process(request);
  await_exec(child);
  EXPECT_EQ(read_to_end(child.stdout_fd), "Cpus_allowed_list:\t" + std::to_string(cpu) + "\n");
  ::close(child.stderr_fd);
  EXPECT_EQ(exit_status_of(child.pid), 0);
}

TEST(SpawnTest, ResolveExecutableSearchesPathAsExecvpDoes) {
  EXPECT_EQ(resolve_executable("sh", "/nonexistent:/bin"), "/bin/sh");
  EXPECT_EQ(resolve_executable("/bin/sh", ""), "/bin/sh") << "a path is taken as it is";
  try {
    resolve_executable("acc-no-such-program", "/bin:/usr/bin");
    FAIL();
  } catch (const LaunchError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot run acc-no-such-program: not found in PATH");
  }
  try {
    resolve_executable("/etc/passwd", "");
    FAIL();
  } catch (const LaunchError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot run /etc/passwd: not an executable file");
  }
  EXPECT_THROW(resolve_executable("/nonexistent/x", ""), LaunchError);
}

TEST(SpawnTest, CStringsEndWithNull) {
  std::vector<std::string> words = {"a", "bc"};
  const std::vector<char*> pointers = c_strings(words);
  ASSERT_EQ(pointers.size(), 3u);
  EXPECT_STREQ(pointers[0], "a");
  EXPECT_STREQ(pointers[1], "bc");
  EXPECT_EQ(pointers[2], nullptr);
}

}  // namespace
}  // namespace acc::launcher
