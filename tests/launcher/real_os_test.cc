// RealOs's reading of /proc, on a real child process.

#include "process/real_os.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

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

}  // namespace
}  // namespace acc::launcher
