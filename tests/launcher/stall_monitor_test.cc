#include "observe/stall_monitor.h"

#include <gtest/gtest.h>

namespace acc::launcher {
namespace {

using namespace std::chrono_literals;
using Clock = StallMonitor::Clock;

const Clock::time_point kStart{};  // a fake clock: the tests pass the time

TEST(StallMonitorTest, StallsWhenNoWorkerMadeProgressForTheTimeout) {
  StallMonitor monitor(3s, 2, kStart);
  EXPECT_FALSE(monitor.check(kStart + 2999ms));
  EXPECT_TRUE(monitor.check(kStart + 3s));
}

TEST(StallMonitorTest, ProgressOfAnyOneWorkerKeepsTheGroupAlive) {
  StallMonitor monitor(3s, 2, kStart);
  monitor.progress(1, kStart + 2s);
  EXPECT_FALSE(monitor.check(kStart + 4s));
  EXPECT_EQ(monitor.next_check(), kStart + 5s);
  EXPECT_TRUE(monitor.check(kStart + 5s));
}

TEST(StallMonitorTest, ReportsAStallOnceUntilNewProgressAndANewStall) {
  StallMonitor monitor(3s, 1, kStart);
  EXPECT_TRUE(monitor.check(kStart + 3s));
  EXPECT_FALSE(monitor.check(kStart + 10s));
  EXPECT_EQ(monitor.next_check(), Clock::time_point::max());
  monitor.progress(0, kStart + 11s);
  EXPECT_FALSE(monitor.check(kStart + 13s));
  EXPECT_TRUE(monitor.check(kStart + 14s));
}

TEST(StallMonitorTest, CountsProgressPerWorkerAndKeepsItsLatestTime) {
  StallMonitor monitor(3s, 2, kStart);
  monitor.progress(0, kStart + 2s);
  monitor.progress(0, kStart + 1s);  // a beat polled late must not move time back
  EXPECT_EQ(monitor.last_progress(0), kStart + 2s);
  EXPECT_EQ(monitor.last_progress(1), kStart);
  EXPECT_EQ(monitor.progress_count(0), 2);
  EXPECT_EQ(monitor.progress_count(1), 0);
}

}  // namespace
}  // namespace acc::launcher
