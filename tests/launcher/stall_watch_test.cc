// The stall watch over a fake clock and a scripted /proc: when a quiet group is reported stalled,
// and when its CPU holds the stall off. The time is the test's, so each check names the exact
// instant a stall fires instead of a wall-clock window; the stacks and the report are left to
// tests/integration/stall_test.cc, over real workers.

#include "hangs/stall_watch.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "acc/launcher/plan/plan.h"
#include "launcher_harness.h"
#include "process/proc.h"

namespace acc::launcher {
namespace {

using namespace std::chrono_literals;
using Clock = StallWatch::Clock;
using std::chrono::milliseconds;

// The workers' stat lines, as the test sets them: a pid not set is gone.
class FakeProc final : public proc::Reader {
 public:
  proc::Stat stat(int pid) override {
    ++looks;
    const auto found = stats.find(pid);
    return found == stats.end() ? proc::Stat{} : found->second;
  }
  void set(int pid, const std::string& state, double cpu_seconds) {
    proc::Stat& s = stats[pid];
    s.ok = true;
    s.state = state;
    s.parent = 1;
    s.cpu_seconds = cpu_seconds;
  }
  std::map<int, proc::Stat> stats;
  int looks = 0;  // stat() calls: each is a /proc read on the machine
};

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
        timeout, [this](const std::string& line) { notices.push_back(line); },
        [this] { return now; }, proc);
  }

  milliseconds elapsed() const { return std::chrono::duration_cast<milliseconds>(now - start); }

  // Jumps from wake to wake (as the agent's wait does), running `before_tick` at each, until the
  // watch reports a stall or `limit` of fake time has passed; returns when it stalled.
  std::optional<milliseconds> run_until_stall(milliseconds limit,
                                              const std::function<void()>& before_tick = {}) {
    const Clock::time_point end = now + limit;
    for (;;) {
      const Clock::time_point wake = watch->next_wake();
      if (wake > end) {
        now = end;
        return std::nullopt;
      }
      now = std::max(now, wake);
      if (before_tick) before_tick();
      if (watch->tick()) return elapsed();
    }
  }

  acc::testing::TempDir dir;
  LaunchPlan plan;
  Round round;
  FakeProc proc;
  const Clock::time_point start = Clock::time_point() + 1h;
  Clock::time_point now = start;
  std::vector<std::string> notices;
  std::unique_ptr<StallWatch> watch;
};

TEST(StallWatchTest, AQuietIdleGroupIsStalledExactlyOneTimeoutAfterItsLastProgress) {
  Fixture f(2s);
  f.now += 1500ms;
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
  f.proc.stats.erase(kPid1);
  f.proc.set(kPid0, "R", 1.0);
  EXPECT_EQ(f.run_until_stall(30s), std::nullopt);
}

// A rank asleep before its first collective while another still starts up: no stall during the
// start-up limit, and one timeout after the last rank's first progress once every rank started.
TEST(StallWatchTest, AStallComesOneTimeoutAfterTheLastRankStartedNotDuringStartUp) {
  Fixture f(2s, 60s);
  f.now += 1s;
  f.watch->progress(0);
  EXPECT_EQ(f.run_until_stall(5s), std::nullopt) << "rank 1 is still starting up";
  f.watch->progress(1);  // at 6 s
  EXPECT_EQ(f.run_until_stall(60s), 8000ms);
}

TEST(StallWatchTest, AGroupThatNeverStartsIsStalledAtTheStartUpLimit) {
  Fixture f(2s, 30s);
  EXPECT_EQ(f.run_until_stall(60s), 30000ms);
}

}  // namespace
}  // namespace acc::launcher
