#include "hangs/stall_monitor.h"

#include <gtest/gtest.h>

namespace acc::launcher {
namespace {

using namespace std::chrono_literals;
using MonitorClock = StallMonitor::Clock;

const MonitorClock::time_point kStart{};  // a fake clock: the tests pass the time

TEST(StallMonitorTest, StallsWhenNoWorkerMadeProgressForTheTimeout) {
  StallMonitor monitor(3s, 2, kStart, 3s);
  EXPECT_FALSE(monitor.check(kStart + 2999ms));
  EXPECT_TRUE(monitor.check(kStart + 3s));
}

TEST(StallMonitorTest, ProgressOfAnyOneWorkerKeepsTheGroupAlive) {
  StallMonitor monitor(3s, 2, kStart, 3s);
  monitor.progress(1, kStart + 2s);
  EXPECT_FALSE(monitor.check(kStart + 4s));
  EXPECT_EQ(monitor.next_check(), kStart + 5s);
  EXPECT_TRUE(monitor.check(kStart + 5s));
}

TEST(StallMonitorTest, ReportsAStallOnceUntilNewProgressAndANewStall) {
  StallMonitor monitor(3s, 1, kStart, 3s);
  EXPECT_TRUE(monitor.check(kStart + 3s));
  EXPECT_FALSE(monitor.check(kStart + 10s));
  EXPECT_EQ(monitor.next_check(), MonitorClock::time_point::max());
  monitor.progress(0, kStart + 11s);
  EXPECT_FALSE(monitor.check(kStart + 13s));
  EXPECT_TRUE(monitor.check(kStart + 14s));
}

TEST(StallMonitorTest, CountsProgressPerWorkerAndKeepsItsLatestTime) {
  StallMonitor monitor(3s, 2, kStart, 3s);
  monitor.progress(0, kStart + 2s);
  monitor.progress(0, kStart + 1s);  // a beat polled late must not move time back
  EXPECT_EQ(monitor.last_progress(0), kStart + 2s);
  EXPECT_EQ(monitor.last_progress(1), kStart);
  EXPECT_EQ(monitor.progress_count(0), 2);
  EXPECT_EQ(monitor.progress_count(1), 0);
}

TEST(StallMonitorTest, AWorkerStartingUpHoldsTheStallOffUntilTheStartUpLimit) {
  StallMonitor monitor(3s, 2, kStart, 60s);
  monitor.progress(0, kStart + 1s);  // worker 1 still imports torch
  EXPECT_FALSE(monitor.started(1));
  EXPECT_FALSE(monitor.check(kStart + 30s));
  EXPECT_EQ(monitor.next_check(), kStart + 60s);
  EXPECT_TRUE(monitor.check(kStart + 60s));
}

TEST(StallMonitorTest, OnceEveryWorkerStartedTheStallTimeoutApplies) {
  StallMonitor monitor(3s, 2, kStart, 60s);
  monitor.progress(0, kStart + 10s);
  monitor.progress(1, kStart + 11s);  // e.g. init_process_group returned
  EXPECT_TRUE(monitor.started(1));
  EXPECT_FALSE(monitor.check(kStart + 13s));
  EXPECT_TRUE(monitor.check(kStart + 14s));
}

TEST(StallMonitorTest, ABusyGroupIsNotStuckUntilATimeoutAfterItWasLastBusy) {
  StallMonitor monitor(3s, 2, kStart, 3s);
  monitor.progress(0, kStart + 1s);
  monitor.progress(1, kStart + 1s);
  monitor.busy(kStart + 3s);
  monitor.busy(kStart + 5s);
  EXPECT_FALSE(monitor.check(kStart + 7s));
  EXPECT_EQ(monitor.next_check(), kStart + 8s);
  EXPECT_TRUE(monitor.check(kStart + 8s));
  EXPECT_EQ(monitor.progress_count(0), 1) << "busy is no worker's progress";
}

}  // namespace
}  // namespace acc::launcher
