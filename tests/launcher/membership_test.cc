// A static job's membership (StaticMembership: the link between its launchers) over a real store
// on a loopback port and a fake clock: the join timeout fires at exactly the fake deadline, and a
// node silent for the keep-alive window is named lost exactly one window after its last beat. The
// other node is played by the test, as a JobLink of its own over the same store, beating when the
// test says. The lines the user sees are tested end to end in tests/integration.

#include "acc/launcher/nodes/membership.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "acc/common/exit_code.h"
#include "acc/common/store_keys.h"
#include "acc/rendezvous/store_client.h"
#include "acc/rendezvous/store_server.h"
#include "fake_clock.h"
#include "nodes/job_link.h"
#include "readable.h"
#include "refusing_port.h"

namespace acc::launcher {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using testing::FakeClock;
using Kind = JobEvent::Kind;

LaunchPlan two_nodes(int node_rank, int master_port) {
  LaunchPlan plan;
  plan.nnodes = 2;
  plan.node_rank = node_rank;
  plan.hostname = "host-" + std::to_string(node_rank);
  plan.master_addr = "127.0.0.1";
  plan.master_port = master_port;
  plan.rdzv_conf["join_timeout"] = "30";  // keep_alive_interval 1 s, window 10 intervals
  return plan;
}

// The other node of the job: a JobLink of its own over a client of the store.
struct OtherNode {
  OtherNode(int node_rank, int port) {
    rendezvous::StoreClientOptions options;
    options.port = port;
    options.connect_timeout = 10s;
    client = std::make_unique<rendezvous::StoreClient>(options);
    JobLink::Options link_options;
    link_options.node_rank = node_rank;
    link_options.nnodes = 2;
    link_options.keep_alive_window = 10s;
    link = std::make_unique<JobLink>(*client, clock, link_options);
    link->join();
  }
  std::optional<JobEnd> published() { return link->ended(); }

  FakeClock clock;  // its own: the test never asks it for a deadline
  std::unique_ptr<rendezvous::StoreClient> client;
  std::unique_ptr<JobLink> link;
};

// Node 1 of a job whose store the test serves.
struct NodeOne {
  NodeOne() {
    rendezvous::StoreServerOptions options;
    options.host = "127.0.0.1";
    server = std::make_unique<rendezvous::StoreServer>(options);
    server->start();
    plan = two_nodes(1, server->port());
  }

  std::unique_ptr<rendezvous::StoreServer> server;
  LaunchPlan plan;
  FakeClock clock;
};

TEST(StaticMembershipTest, ANodeWhoseOthersNeverArriveTimesOutAtTheJoinTimeoutAndEndsTheJob) {
  NodeOne node;
  StaticMembership membership(node.plan, node.clock);
  try {
    membership.join(0);
    FAIL() << "node 0 never arrived";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()),
              "node 1: not every node reached the start of attempt 0 within the join timeout (30 "
              "s, --rdzv_conf join_timeout)");
  }
  EXPECT_EQ(node.clock.elapsed_ms(), 30000ms);
  // The end is in the store, so that a node 0 that comes now ends too instead of waiting.
  OtherNode zero(0, node.server->port());
  const std::optional<JobEnd> end = zero.published();
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->node, 1);
  EXPECT_EQ(end->status, kExitTimeout);
}

TEST(StaticMembershipTest, ASilentNodeZeroIsNamedLostExactlyOneKeepAliveWindowAfterItsLastBeat) {
  NodeOne node;
  OtherNode zero(0, node.server->port());
  zero.link->arrive(store_keys::attempt_barrier(0));
  StaticMembership membership(node.plan, node.clock);
  membership.join(0);
  EXPECT_EQ(node.clock.elapsed_ms(), 0ms) << "node 0 was at the barrier already";
  ASSERT_EQ(membership.poll_interval(), 1000ms);
  // The agent's watch once an interval; node 0 beats until 3 s, then goes silent.
  JobEvent event;
  while (event.kind == Kind::kNone && node.clock.elapsed() < 60s) {
    node.clock.advance(membership.poll_interval());
    if (node.clock.elapsed() <= 3s) zero.link->beat();
    event = membership.watch(0);
  }
  ASSERT_EQ(event.kind, Kind::kEnded);
  EXPECT_EQ(node.clock.elapsed_ms(), 13000ms);
  EXPECT_EQ(event.end.node, 0);
  EXPECT_EQ(event.end.status, kExitNodeLost);
  EXPECT_EQ(event.end.reason, "its launcher stopped beating for 10 s (seen by node 1)");
  EXPECT_TRUE(event.shared);
}

TEST(StaticMembershipTest, NodeZeroNamesASilentNodeLostAtTheWindowAndDoesNotWaitForIt) {
  // Node 0 serves the store itself, on the port the test holds (bound, not listening: nobody else
  // is given it); the test's node 1 joins at node 0's first look at the barrier.
  const acc::testing::RefusingPort port;
  FakeClock clock;
  std::unique_ptr<OtherNode> one;
  clock.on_sleep = [&](FakeClock::duration) {
    if (one) return;
    one = std::make_unique<OtherNode>(1, port.port());
    one->link->arrive(store_keys::attempt_barrier(0));
  };
  const LaunchPlan plan = two_nodes(0, port.port());
  StaticMembership membership(plan, clock);
  const Round round = membership.join(0);
  EXPECT_EQ(round.master_port, port.port());
  ASSERT_TRUE(one) << "node 0 never waited at the barrier";
  const auto joined = clock.elapsed();
  EXPECT_EQ(joined, 100ms) << "one look at the barrier, one wait step, the second look";
  JobEvent event;
  while (event.kind == Kind::kNone && clock.elapsed() < 60s) {
    clock.advance(1s);
    if (clock.elapsed() <= joined + 2s) one->link->beat();
    event = membership.watch(0);
  }
  ASSERT_EQ(event.kind, Kind::kEnded);
  EXPECT_EQ(clock.elapsed(), joined + 2s + 10s);
  EXPECT_EQ(event.end.node, 1);
  EXPECT_EQ(event.end.status, kExitNodeLost);
  EXPECT_EQ(event.end.reason, "its launcher stopped beating for 10 s (seen by node 0)");
  // A lost node never lets go of node 0's store: node 0 leaves without waiting for it.
  const int sleeps = clock.sleeps();
  membership.leave(false);
  EXPECT_EQ(clock.sleeps(), sleeps);
}

// A hang guard for an event the test expects: never a window a passing test waits out.
constexpr int kHangGuardMs = 60'000;

TEST(StaticMembershipTest, AnotherNodesRestartWakesTheEventDescriptorWithoutTheClockMoving) {
  NodeOne node;
  OtherNode zero(0, node.server->port());
  zero.link->arrive(store_keys::attempt_barrier(0));
  StaticMembership membership(node.plan, node.clock);
  membership.join(0);
  const int fd = membership.event_fd();
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(readable(fd, 0));
  EXPECT_FALSE(membership.take_event());
  zero.link->restart(0);  // node 0's workers failed
  ASSERT_TRUE(readable(fd, kHangGuardMs));
  EXPECT_TRUE(membership.take_event());
  const JobEvent event = membership.watch(0);
  EXPECT_EQ(event.kind, Kind::kRestart);
  EXPECT_EQ(event.restart_count, 1);
  EXPECT_EQ(node.clock.elapsed_ms(), 0ms) << "seen without waiting for a keep-alive tick";
  // Once taken, the descriptor stays quiet: a poll loop that keeps it does not spin.
  EXPECT_FALSE(readable(fd, 0));
  EXPECT_FALSE(membership.take_event());
}

TEST(StaticMembershipTest, AnEndPublishedElsewhereWakesTheEventDescriptorToo) {
  NodeOne node;
  OtherNode zero(0, node.server->port());
  zero.link->arrive(store_keys::attempt_barrier(0));
  StaticMembership membership(node.plan, node.clock);
  membership.join(0);
  const int fd = membership.event_fd();
  ASSERT_GE(fd, 0);
  JobEnd end;
  end.reason = "rank 0 exited with 3";
  zero.link->end(end);
  ASSERT_TRUE(readable(fd, kHangGuardMs));
  EXPECT_TRUE(membership.take_event());
  const JobEvent event = membership.watch(0);
  EXPECT_EQ(event.kind, Kind::kEnded);
  EXPECT_EQ(event.end.reason, "rank 0 exited with 3");
  EXPECT_EQ(node.clock.elapsed_ms(), 0ms);
}

// A clock whose time stands still and whose sleeps are counted; its waits for keys are the real
// clock's (a store WAIT). A wait that sleeps between looks would move it.
class StillClock final : public rendezvous::Clock {
 public:
  time_point now() const override { return now_; }
  wall_time_point wall_now() const override { return wall_time_point() + (now_ - time_point()); }
  void sleep_until(time_point deadline) const override {
    ++sleeps;
    now_ = std::max(now_, deadline);
  }
  mutable int sleeps = 0;

 private:
  mutable time_point now_ = time_point() + std::chrono::hours(1);
};

TEST(StaticMembershipTest, TheAttemptBarrierEndsOnTheLastArrivalsKeyWithoutSleepingBetweenLooks) {
  NodeOne node;
  OtherNode zero(0, node.server->port());
  // Node 0 arrives once node 1 waits at the barrier (the test's side looks every millisecond).
  std::thread arrival([&] {
    while (zero.client->add(store_keys::attempt_barrier(0), 0) < 1)
      std::this_thread::sleep_for(1ms);
    zero.link->arrive(store_keys::attempt_barrier(0), 1, store_keys::attempt_ready(0));
  });
  StillClock clock;
  StaticMembership membership(node.plan, clock);
  membership.join(0);
  arrival.join();
  EXPECT_EQ(clock.sleeps, 0) << "a barrier's wait is a store WAIT, not a sleep and a look";
}

}  // namespace
}  // namespace acc::launcher
