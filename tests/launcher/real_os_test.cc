// RealOs on real child processes: its reading of /proc, and the programs it runs beside the
// workers (a debugger, scontrol, the launcher itself).

#include "process/real_os.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "acc/common/error.h"
#include "launcher_harness.h"

namespace acc::launcher {
namespace {

TEST(RealOsTest, ProcessStateReadsTheStateAfterACommandNameWithParentheses) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::prctl(PR_SET_NAME, "a) S (b");  // the state follows the last ')' of /proc/<pid>/stat
    ::pause();
    ::_exit(0);
  }
  RealOs os;
  // Hang guard only: the child is asleep in pause() within microseconds.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Os::ProcessState state = os.process_state(child);
  while (state.state != 'S' && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
    state = os.process_state(child);
  }
  EXPECT_EQ(state.state, 'S');
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(os.process_state(child).state, '?');  // reaped: gone from /proc
}

// Two children exit while SIGCHLD is pending: the one that exited first comes first, though
// the kernel's own scan (waitid on any child) finds the older one first.
TEST(RealOsTest, OfChildrenThatExitedTogetherTheFirstToExitComesFirst) {
  RealOs os;
  os.take_signals({});
  // Children that earlier tests of this process (launcher_tests run whole) left unreaped would
  // come first.
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t older = ::fork();  // exits second
  if (older == 0) {
    ::close(go[1]);
    char byte = 0;
    (void)!::read(go[0], &byte, 1);
    ::_exit(2);
  }
  const pid_t younger = ::fork();  // exits first
  if (younger == 0) ::_exit(1);
  // The younger one's SIGCHLD is pending before the older one exits.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(younger), &info, WEXITED | WNOWAIT), 0);
  ::close(go[1]);
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(older), &info, WEXITED | WNOWAIT), 0);
  ::close(go[0]);
  std::vector<pollfd> none;
  std::vector<int> signals = os.wait(none, os.now() + std::chrono::seconds(5));
  ASSERT_EQ(signals, std::vector<int>{SIGCHLD});
  ASSERT_EQ(os.exited_child(), younger);
  EXPECT_EQ(WEXITSTATUS(os.reap(younger)), 1);
  ASSERT_EQ(os.exited_child(), older);
  EXPECT_EQ(WEXITSTATUS(os.reap(older)), 2);
  EXPECT_EQ(os.exited_child(), std::nullopt);
}

// scontrol's output comes back whole, without its stderr, and an argument is one word, never
// parsed by a shell.
TEST(RealOsTest, ProgramOutputIsItsStdoutAloneWithEachArgumentOneWord) {
  RealOs os;
  const std::string sh = os.find_program("sh");
  ASSERT_FALSE(sh.empty());
  const std::optional<std::string> output = os.program_output(
      {sh, "-c", "printf '%s|' \"$@\"; echo oops >&2", "sh", "node 1'; rm -rf x", "b"});
  ASSERT_TRUE(output);
  EXPECT_EQ(*output, "node 1'; rm -rf x|b|");
  EXPECT_FALSE(os.program_output({"/nonexistent/scontrol", "show"}));
  EXPECT_EQ(os.find_program("no-such-program-acc-launch"), "");
}

TEST(RealOsTest, RunProgramWaitsForItAndReturnsItsStatus) {
  RealOs os;
  const std::string sh = os.find_program("sh");
  const int status = os.run_program({sh, "-c", "exit 3"});
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  EXPECT_THROW(os.run_program({"/nonexistent/acc-launch"}), LaunchError);
}

// The debugger's stdout goes to its file; its exit is seen without blocking, once; one that does
// not end is killed and reaped.
TEST(RealOsTest, AStartedProgramWritesItsFileAndItsExitIsSeenWithoutBlocking) {
  acc::testing::TempDir dir;
  RealOs os;
  const std::string sh = os.find_program("sh");
  const std::string file = dir.path() + "/out.txt";
  const pid_t pid = os.start_program({sh, "-c", "echo done; echo oops >&2"}, file);
  ASSERT_GT(pid, 0);
  // Hang guard only.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::optional<int> status;
  while (!(status = os.exit_status(pid)) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status));
  std::stringstream text;
  text << std::ifstream(file).rdbuf();
  EXPECT_EQ(text.str(), "done\n");

  const pid_t stuck = os.start_program({sh, "-c", "exec sleep 60"}, dir.path() + "/stuck.txt");
  ASSERT_GT(stuck, 0);
  EXPECT_FALSE(os.exit_status(stuck));
  EXPECT_TRUE(os.signal_process(stuck, SIGKILL));
  EXPECT_TRUE(WIFSIGNALED(os.reap(stuck)));
  EXPECT_FALSE(os.signal_process(stuck, 0)) << "reaped: gone";
  EXPECT_EQ(os.start_program({"/nonexistent/eu-stack"}, file), -1);
}

TEST(RealOsTest, ProcSaysWhoThisProgramIsAndWhoOwnsAProcess) {
  RealOs os;
  EXPECT_EQ(os.proc().executable(), std::filesystem::read_symlink("/proc/self/exe").string());
  EXPECT_EQ(os.proc().owner(::getpid()), static_cast<long>(::getuid()));
  EXPECT_EQ(os.proc().owner(5000001), -1) << "above any pid_max: no such process";
  EXPECT_GT(os.proc().nr_open(), 0);
}

// What `acc-launch stacks` tells launchers apart by: session, working directory and start.
TEST(RealOsTest, ProcSaysWhereAndWhenAProcessStarted) {
  RealOs os;
  const proc::Stat self = os.proc().stat(::getpid());
  EXPECT_EQ(self.session, ::getsid(0));
  EXPECT_EQ(os.proc().working_directory(::getpid()), std::filesystem::current_path().string());
  EXPECT_EQ(os.proc().working_directory(5000001), "");
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  EXPECT_LE(self.started, now);
  EXPECT_GT(self.started, now - 3600) << "this test began less than an hour ago";
}

// What tells a run directory's owner from a process that took its pid later (agent/run_dir.h).
TEST(RealOsTest, ProcSaysWhenAProcessStartedAndWherePidsAreNumbered) {
  RealOs os;
  const proc::Stat self = os.proc().stat(::getpid());
  ASSERT_TRUE(self.ok);
  EXPECT_GT(self.start_ticks, 0u);
  EXPECT_EQ(os.proc().stat(::getpid()).start_ticks, self.start_ticks) << "read twice: the same";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  EXPECT_GE(os.proc().stat(child).start_ticks, self.start_ticks) << "started later";
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(os.proc().stat(child).ok);
  // "<boot id> pid:[<inode>]", as another process of this namespace sees it too.
  const std::string space = os.proc().pid_space();
  EXPECT_NE(space.find(" pid:["), std::string::npos) << space;
  EXPECT_EQ(space.find('\n'), std::string::npos) << space;
  EXPECT_EQ(RealOs().proc().pid_space(), space);
}

}  // namespace
}  // namespace acc::launcher
