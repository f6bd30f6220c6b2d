// The stall watch over a fake clock and a fake Os (its /proc and its debuggers scripted): when a
// quiet group is reported stalled, when its CPU holds the stall off, and what its report collects
// of each worker. The time is the test's, so each check names the exact instant a stall fires
// instead of a wall-clock window; tests/integration/stall_test.cc runs it over real workers.

#include "hangs/stall_watch.h"

#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "acc/launcher/plan/plan.h"
#include "fake_os.h"
#include "launcher_harness.h"

namespace acc::launcher {
namespace {

using namespace std::chrono_literals;
using WatchClock = StallWatch::Clock;
using std::chrono::milliseconds;

constexpr int kPid0 = 4242;
constexpr int kPid1 = 4243;

// One node, no job store (no beats to poll), two workers whose directories hold no progress file:
// only the test's progress() calls and the scripted CPU tell the watch anything.
struct Fixture {
  explicit Fixture(milliseconds timeout, milliseconds init_timeout = 0ms) {
    plan.stall_init_timeout = init_timeout;
    plan.hostname = "host-0";
    proc.set(kPid0, "S", 1.0);
    proc.set(kPid1, "S", 1.0);
    watch = std::make_unique<StallWatch>(
        plan, round,
        std::vector<StallWatch::Worker>{{0, 0, kPid0, dir.path()}, {1, 1, kPid1, dir.path()}},
        timeout, [this](const std::string& line) { notices.push_back(line); }, os);
  }

  milliseconds elapsed() const { return os.elapsed(); }

  // Jumps from wake to wake (as the agent's wait does), running `before_tick` at each, until the
  // watch reports a stall or `limit` of fake time has passed; returns when it stalled.
  std::optional<milliseconds> run_until_stall(milliseconds limit,
                                              const std::function<void()>& before_tick = {}) {
    const WatchClock::time_point end = os.now() + limit;
    for (;;) {
      const WatchClock::time_point wake = watch->next_wake();
      if (wake > end) {
        os.sleep_until(end);
        return std::nullopt;
      }
      os.sleep_until(wake);
      if (before_tick) before_tick();
      if (watch->tick()) return elapsed();
    }
  }

  acc::testing::TempDir dir;
  LaunchPlan plan;
  Round round;
  testing::FakeOs os;
  testing::FakeProc& proc = os.fake_proc;
  std::vector<std::string> notices;
  std::unique_ptr<StallWatch> watch;
};

TEST(StallWatchTest, AQuietIdleGroupIsStalledExactlyOneTimeoutAfterItsLastProgress) {
  Fixture f(2s);
  f.os.sleep_for(1500ms);
  f.watch->progress(0);
  f.watch->progress(1);
  EXPECT_EQ(f.run_until_stall(10s), 3500ms);
}

TEST(StallWatchTest, AStallIsReportedOnceHoweverLongTheSilenceThenAgainAfterNewProgress) {
  Fixture f(1s);
  EXPECT_EQ(f.run_until_stall(10s), 1000ms);
  // Ten more timeouts of silence: no second report (--stall_action report goes on watching).
  EXPECT_EQ(f.run_until_stall(10s), std::nullopt);
  f.watch->progress(1);
  EXPECT_EQ(f.run_until_stall(10s), 11000ms + 1000ms);
}

TEST(StallWatchTest, RanksWhoseCpuKeepsMovingAreComputingNotStalledAndTheUserIsToldOnce) {
  Fixture f(2s);
  f.watch->progress(0);
  f.watch->progress(1);
  // Half a core each until 5 s, then nothing: the watch polls every 500 ms (a quarter of the
  // timeout), and its last busy poll is the one at 5 s.
  const auto script = [&f] {
    const double t = std::min(std::chrono::duration<double>(f.elapsed()).count(), 5.0);
    f.proc.set(kPid0, "S", 1.0 + 0.5 * t);
    f.proc.set(kPid1, "S", 1.0 + 0.5 * t);
  };
  EXPECT_EQ(f.run_until_stall(60s, script), 5000ms + 2000ms);
  ASSERT_EQ(f.notices.size(), 1u);
  EXPECT_NE(f.notices[0].find("every rank is busy on CPU outside collectives: computing, not a "
                              "hang (--stall_timeout goes on watching)"),
            std::string::npos)
      << f.notices[0];
}

TEST(StallWatchTest, WithoutAStallTimeoutNoWorkersProcIsRead) {
  Fixture f(0ms);  // no --stall_timeout: sections' deadlines and stragglers only
  EXPECT_EQ(f.run_until_stall(10s), std::nullopt);
  EXPECT_EQ(f.proc.looks, 0);
}

TEST(StallWatchTest, ARunningRankCountsAsBusyWithoutCpuTimeInTheSample) {
  Fixture f(2s);
  f.proc.set(kPid0, "R", 1.0);
  f.proc.set(kPid1, "R", 1.0);
  EXPECT_EQ(f.run_until_stall(30s), std::nullopt);
}

TEST(StallWatchTest, OneIdleRankIsEnoughForTheGroupToStall) {
  Fixture f(2s);
  const auto script = [&f] {
    f.proc.set(kPid0, "S", 1.0 + std::chrono::duration<double>(f.elapsed()).count());
  };
  EXPECT_EQ(f.run_until_stall(30s, script), 2000ms);
}

TEST(StallWatchTest, AGoneWorkerIsNotSampledAndTheRestDecide) {
  Fixture f(2s);
  f.proc.remove(kPid1);
  f.proc.set(kPid0, "R", 1.0);
  EXPECT_EQ(f.run_until_stall(30s), std::nullopt);
}

// A rank asleep before its first collective while another still starts up: no stall during the
// start-up limit, and one timeout after the last rank's first progress once every rank started.
TEST(StallWatchTest, AStallComesOneTimeoutAfterTheLastRankStartedNotDuringStartUp) {
  Fixture f(2s, 60s);
  f.os.sleep_for(1s);
  f.watch->progress(0);
  EXPECT_EQ(f.run_until_stall(5s), std::nullopt) << "rank 1 is still starting up";
  f.watch->progress(1);  // at 6 s
  EXPECT_EQ(f.run_until_stall(60s), 8000ms);
}

TEST(StallWatchTest, AGroupThatNeverStartsIsStalledAtTheStartUpLimit) {
  Fixture f(2s, 30s);
  EXPECT_EQ(f.run_until_stall(60s), 30000ms);
}

// Without a debugger, each running worker's threads and its children's come from /proc; a worker
// that has exited is left out.
TEST(StallWatchTest, AReportShowsEachRunningWorkerAndItsChildrenAsProcSaysWithoutADebugger) {
  Fixture f(2s);
  f.proc.at(kPid0).thread_files[kPid0] = {{"comm", "python3\n"}, {"wchan", "futex_wait_queue\n"}};
  testing::FakeProc::Process& loader = f.proc.set(5000, "S", 0, kPid0);
  loader.name = "pt_data_worker";
  loader.thread_files[5000] = {{"comm", "pt_data_worker\n"}, {"wchan", "pipe_read\n"}};
  f.proc.at(kPid1).thread_files[kPid1] = {{"comm", "python3\n"}, {"wchan", "ep_poll\n"}};

  const std::string report = f.watch->report({true, false}, false);
  EXPECT_NE(report.find("thread python3 (main): state S, wchan futex_wait_queue"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("pt_data_worker"), std::string::npos) << report;
  EXPECT_NE(report.find("thread pt_data_worker (main): state S, wchan pipe_read"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("ep_poll"), std::string::npos) << "rank 1 has exited:\n" << report;
  EXPECT_NE(report.find("neither eu-stack nor gdb is installed"), std::string::npos) << report;
  EXPECT_TRUE(f.os.processes().empty()) << "no debugger to start";
  EXPECT_EQ(f.os.elapsed(), 0ms);
}

// A debugger that does not finish holds the report for the stack budget (3 s) of the Os's clock,
// no longer: then it is killed, and the worker it may have left stopped is continued.
TEST(StallWatchTest,
     AReportWaitsForAStuckDebuggerAtMostThreeSecondsThenKillsItAndContinuesTheWorker) {
  Fixture f(2s);
  f.os.installed["eu-stack"] = "/usr/bin/eu-stack";
  f.os.helper = [](const std::vector<std::string>&) { return testing::Script{}; };  // never ends
  f.proc.at(kPid0).thread_files[kPid0] = {{"comm", "train\n"}, {"wchan", "0\n"}};

  const std::string report = f.watch->report({true, false}, true);
  EXPECT_EQ(f.os.elapsed(), 3000ms);
  ASSERT_EQ(f.os.processes().size(), 1u);
  const testing::FakeOs::Process& tool = *f.os.processes()[0];
  EXPECT_EQ(tool.request.argv,
            (std::vector<std::string>{"/usr/bin/eu-stack", "-s", "-p", std::to_string(kPid0)}));
  EXPECT_TRUE(tool.got(SIGKILL));
  EXPECT_TRUE(tool.reaped);
  EXPECT_NE(std::find(f.os.signalled.begin(), f.os.signalled.end(), std::pair(kPid0, SIGCONT)),
            f.os.signalled.end());
  EXPECT_NE(report.find("eu-stack took too long"), std::string::npos) << report;
  EXPECT_NE(report.find("thread train (main): state S, wchan -"), std::string::npos) << report;
}

}  // namespace
}  // namespace acc::launcher
