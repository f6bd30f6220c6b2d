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

}  // namespace
}  // namespace acc::launcher
