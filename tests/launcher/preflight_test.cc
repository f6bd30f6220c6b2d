// The pre-flight's waits over a fake clock, against a real loopback port that refuses (bound,
// not listening) and then listens: the bound fires at exactly --preflight_timeout, a master that
// comes up late is reached at the next try, a stop signal ends the wait within a slice. Connects
// to loopback are answered at once, so the fake time moves only by the pre-flight's own sleeps.
// The lines the user sees are tested end to end in tests/integration/preflight_test.cc.

#include "nodes/preflight.h"

#include <signal.h>

#include <gtest/gtest.h>

#include <string>

#include "acc/common/error.h"
#include "fake_clock.h"
#include "refusing_port.h"

namespace acc::launcher {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using testing::FakeClock;

// Node 1 of a static two-node job whose master is at the refusing port.
LaunchPlan node_one(int master_port, milliseconds preflight_timeout) {
  LaunchPlan plan;
  plan.nnodes = 2;
  plan.node_rank = 1;
  plan.master_addr = "127.0.0.1";
  plan.master_port = master_port;
  plan.preflight_timeout = preflight_timeout;
  return plan;
}

TEST(RunPreflightTest, AMasterThatRefusesUntilTheBoundFailsAtExactlyTheBoundNamingIt) {
  const acc::testing::RefusingPort refusing;
  FakeClock clock;
  try {
    run_preflight(node_one(refusing.port(), 3s), {}, clock);
    FAIL() << "the master refused every try";
  } catch (const NetworkError& e) {
    EXPECT_EQ(std::string(e.what()),
              "pre-flight: cannot reach the master (--master_addr, --master_port) at " +
                  refusing.address() + ": connection refused (tried for 3 s, --preflight_timeout)");
  }
  // Tries at 0, 1, 2 and 3 s; the one at the bound is the last.
  EXPECT_EQ(clock.elapsed_ms(), 3000ms);
}

TEST(RunPreflightTest, AMasterThatComesUpLateIsReachedAtTheNextTry) {
  acc::testing::RefusingPort refusing;
  FakeClock clock;
  clock.on_sleep = [&, listening = false](FakeClock::duration at) mutable {
    if (listening || at < 2500ms) return;
    refusing.listen();
    listening = true;
  };
  run_preflight(node_one(refusing.port(), 60s), {}, clock);
  EXPECT_EQ(clock.elapsed_ms(), 3000ms);
}

TEST(RunPreflightTest, AStopSignalEndsTheWaitBetweenTriesWithinASlice) {
  const acc::testing::RefusingPort refusing;
  FakeClock clock;
  const auto stop = [&clock] { return clock.elapsed() >= 1550ms ? SIGTERM : 0; };
  try {
    run_preflight(node_one(refusing.port(), 60s), stop, clock);
    FAIL() << "SIGTERM arrived at 1.55 s";
  } catch (const InterruptedError& e) {
    EXPECT_EQ(e.signal(), SIGTERM);
    EXPECT_EQ(std::string(e.what()), "stopped by SIGTERM during the pre-flight check");
  }
  EXPECT_EQ(clock.elapsed_ms(), 1600ms);
}

TEST(RunPreflightTest, NothingToCheckOnNodeZeroOrWithoutATimeout) {
  const acc::testing::RefusingPort refusing;
  FakeClock clock;
  LaunchPlan plan = node_one(refusing.port(), 3s);
  plan.node_rank = 0;
  run_preflight(plan, {}, clock);
  plan = node_one(refusing.port(), 0ms);
  run_preflight(plan, {}, clock);
  EXPECT_EQ(clock.elapsed_ms(), 0ms);
  EXPECT_EQ(clock.sleeps(), 0);
}

TEST(TryReachTest, RefusedAndReachedAreToldApartOnAPortThatThenListens) {
  acc::testing::RefusingPort refusing;
  FakeClock clock;
  const Endpoint endpoint{"127.0.0.1", refusing.port()};
  const ReachResult refused = try_reach(endpoint, true, 1000ms, {}, clock);
  EXPECT_EQ(refused.reach, Reach::kRefused);
  EXPECT_EQ(refused.why, "connection refused");
  refusing.listen();
  EXPECT_EQ(try_reach(endpoint, true, 1000ms, {}, clock).reach, Reach::kReached);
}

}  // namespace
}  // namespace acc::launcher
