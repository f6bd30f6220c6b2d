// The libraries' seam to the machine (acc/common/clock.h, acc/common/processes.h), against the
// machine itself: this test process, and a child it starts and reaps.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "acc/common/clock.h"
#include "acc/common/processes.h"

namespace acc {
namespace {

using namespace std::chrono_literals;

TEST(MachineClockTest, NeverGoesBackAndSleepsAtLeastAsLongAsAsked) {
  const Clock& clock = Clock::machine();
  const Clock::time_point start = clock.now();
  clock.sleep_for(20ms);
  EXPECT_GE(clock.now() - start, 20ms);
  EXPECT_GE(clock.seconds_since(start), 0.020);
  EXPECT_EQ(&clock, &Clock::machine()) << "one object for the process";
}

TEST(ProcessesTest, ThisProcessIsSeenAndAReapedChildIsGone) {
  EXPECT_TRUE(processes::exists(::getpid()));
  EXPECT_TRUE(processes::exists(1)) << "another user's process exists too";
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(processes::exists(child));
}

TEST(ProcessesTest, ThisProgramsFileArgumentsAndThreadsAreRead) {
  EXPECT_NE(processes::own_executable().find("common_tests"), std::string::npos)
      << processes::own_executable();
  // ctest runs each test with --gtest_filter=...; argv[0] is never among them.
  for (const std::string& arg : processes::own_arguments()) {
    EXPECT_TRUE(arg.starts_with("--gtest")) << arg;
    EXPECT_EQ(arg.find("common_tests"), std::string::npos) << arg;
  }
  const int before = processes::own_thread_count();
  EXPECT_GE(before, 1);
  std::thread second([] { std::this_thread::sleep_for(200ms); });
  EXPECT_EQ(processes::own_thread_count(), before + 1);
  second.join();
}

}  // namespace
}  // namespace acc
