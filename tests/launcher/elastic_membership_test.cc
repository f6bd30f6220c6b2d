// Elastic membership (--rdzv_backend c10d) of two nodes in one process, over a rendezvous store
// the test serves on a loopback port 0, each node on a fake clock of its own: they agree on a
// round, and a node that stops beating is seen exactly one keep-alive window after its last beat.
// The same two nodes over a real etcd (--rdzv_backend etcd-v2, where etcd-server is installed):
// a failure on one wakes the other through its descriptor, without a keep-alive tick.
// The store's waits on keys run in real time, so only what no such wait decides is timed here;
// joins, spares and lost stores are tested end to end in tests/integration/elastic.

#include "nodes/elastic_membership.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <memory>
#include <set>
#include <string>

#include "acc/rendezvous/store_server.h"
#include "etcd_process.h"
#include "fake_clock.h"
#include "readable.h"

namespace acc::launcher {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;

// A hang guard for a join the test expects to finish: never a window a passing test waits out.
constexpr auto kHangGuard = 60s;

LaunchPlan elastic_node(int rdzv_port, const std::string& local_addr) {
  LaunchPlan plan;
  plan.rdzv_backend = "c10d";
  plan.run_id = "job";
  plan.min_nodes = 2;
  plan.max_nodes = 2;
  plan.rdzv_host = "127.0.0.1";
  plan.rdzv_port = rdzv_port;
  plan.local_addr = local_addr;  // two addresses of loopback: two node ids in one process
  plan.rdzv_conf = {{"is_host", "0"},
                    {"join_timeout", "60"},
                    {"keep_alive_interval", "1"},
                    {"keep_alive_max_attempt", "10"}};
  return plan;
}

class ElasticMembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rendezvous::StoreServerOptions options;
    options.host = "127.0.0.1";
    server_ = std::make_unique<rendezvous::StoreServer>(options);
    server_->start();
    plan_a_ = elastic_node(server_->port(), "127.0.0.1");
    plan_b_ = elastic_node(server_->port(), "127.0.0.2");
    a_ = std::make_unique<ElasticMembership>(plan_a_, "node-a", clock_a_);
    b_ = std::make_unique<ElasticMembership>(plan_b_, "node-b", clock_b_);
  }

  // Both nodes join, each on a thread of its own, and agree on a round of two.
  void join_both() {
    auto joined_a = std::async(std::launch::async, [this] { return a_->join(0); });
    auto joined_b = std::async(std::launch::async, [this] { return b_->join(0); });
    ASSERT_EQ(joined_a.wait_for(kHangGuard), std::future_status::ready);
    ASSERT_EQ(joined_b.wait_for(kHangGuard), std::future_status::ready);
    const Round a = joined_a.get();
    const Round b = joined_b.get();
    EXPECT_EQ(a.nnodes, 2);
    EXPECT_EQ(b.nnodes, 2);
    EXPECT_EQ((std::set<int>{a.node_rank, b.node_rank}), (std::set<int>{0, 1}));
    EXPECT_EQ(a.master_port, b.master_port) << "one workers' store for the round";
  }

  std::unique_ptr<rendezvous::StoreServer> server_;
  LaunchPlan plan_a_;
  LaunchPlan plan_b_;
  FakeClock clock_a_;
  FakeClock clock_b_;
  std::unique_ptr<ElasticMembership> a_;
  std::unique_ptr<ElasticMembership> b_;
};

TEST(LauncherGoneTest, OnlyALauncherOfThisAddressWhoseProcessExitedOrHadThisPidIsGone) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string self = "10.0.0.5:" + std::to_string(::getpid());
  EXPECT_TRUE(launcher_gone("10.0.0.5:" + std::to_string(child), self));
  EXPECT_TRUE(launcher_gone(self, self)) << "this launcher's pid in another pid namespace";
  EXPECT_FALSE(launcher_gone("10.0.0.5:1", self)) << "a process that exists";
  EXPECT_FALSE(launcher_gone("10.0.0.6:" + std::to_string(child), self)) << "another machine";
  EXPECT_FALSE(launcher_gone("10.0.0.50:" + std::to_string(child), self));
  EXPECT_FALSE(launcher_gone("10.0.0.5:x", self));
  EXPECT_FALSE(launcher_gone("10.0.0.5", self));
  EXPECT_TRUE(launcher_gone("::1:" + std::to_string(child), "::1:" + std::to_string(::getpid())));
}

TEST_F(ElasticMembershipTest, TwoNodesAgreeOnARoundAndNothingChangesWhileBothBeat) {
  join_both();
  ASSERT_EQ(a_->poll_interval(), 1000ms);
  for (int second = 1; second <= 30; ++second) {
    clock_a_.advance(1s);
    clock_b_.advance(1s);
    EXPECT_FALSE(b_->changed()) << "at " << second << " s";
    EXPECT_FALSE(a_->changed()) << "at " << second << " s";
  }
}

TEST_F(ElasticMembershipTest, ANodeThatStopsBeatingIsSeenExactlyOneKeepAliveWindowLater) {
  join_both();
  // Both beat once a second; node b's launcher freezes after its beat at 3 s.
  int changed_at = 0;
  for (int second = 1; second <= 60 && changed_at == 0; ++second) {
    clock_a_.advance(1s);
    clock_b_.advance(1s);
    if (second <= 3) {
      EXPECT_FALSE(b_->changed());
    }
    if (a_->changed()) changed_at = second;
  }
  EXPECT_EQ(changed_at, 3 + 10)
      << "the window: keep_alive_interval 1 s x keep_alive_max_attempt 10";
}

TEST_F(ElasticMembershipTest, AFailureOnOneNodeWakesTheOtherAtOnceWithoutTheClockMoving) {
  join_both();
  const int fd = b_->event_fd();
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(readable(fd, 0));
  const auto before = clock_b_.elapsed();
  // Node a's workers failed: it opens the next round before it stops them.
  const JobEvent restart = a_->restart_job(0);
  EXPECT_EQ(restart.kind, JobEvent::Kind::kRestart);
  ASSERT_TRUE(readable(fd, static_cast<int>(std::chrono::milliseconds(kHangGuard).count())));
  EXPECT_TRUE(b_->take_event());
  const JobEvent seen = b_->watch(0);
  EXPECT_EQ(seen.kind, JobEvent::Kind::kMeetAgain);
  EXPECT_EQ(seen.why, "another node's workers failed; meeting again");
  EXPECT_EQ(clock_b_.elapsed(), before) << "seen without waiting for a keep-alive tick";
  EXPECT_FALSE(readable(fd, 0)) << "quiet once taken";
  // Both meet in the next round, which counts the failure.
  auto joined_a = std::async(std::launch::async, [this] { return a_->join(1); });
  auto joined_b = std::async(std::launch::async, [this] { return b_->join(0); });
  ASSERT_EQ(joined_a.wait_for(kHangGuard), std::future_status::ready);
  ASSERT_EQ(joined_b.wait_for(kHangGuard), std::future_status::ready);
  EXPECT_EQ(joined_a.get().restart_count, 1);
  EXPECT_EQ(joined_b.get().restart_count, 1);
}

// The same, with the nodes meeting on etcd: the descriptor is an etcd watch.
class ElasticMembershipOnEtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!acc::testing::EtcdProcess::installed())
      GTEST_SKIP() << "no " << acc::testing::EtcdProcess::binary()
                   << " (Debian's etcd-server; or set ACC_ETCD)";
    std::string log;
    ASSERT_TRUE(etcd_.start(log)) << "etcd exited before it served:\n" << log;
    for (LaunchPlan* plan : {&plan_a_, &plan_b_}) {
      *plan = elastic_node(0, plan == &plan_a_ ? "127.0.0.1" : "127.0.0.2");
      plan->rdzv_backend = "etcd-v2";
      plan->rdzv_host.clear();
      plan->rdzv_port = 0;
      plan->etcd_endpoints = {etcd_.endpoint()};
    }
    a_ = std::make_unique<ElasticMembership>(plan_a_, "node-a", clock_a_);
    b_ = std::make_unique<ElasticMembership>(plan_b_, "node-b", clock_b_);
  }

  acc::testing::EtcdProcess etcd_;
  LaunchPlan plan_a_;
  LaunchPlan plan_b_;
  FakeClock clock_a_;
  FakeClock clock_b_;
  std::unique_ptr<ElasticMembership> a_;
  std::unique_ptr<ElasticMembership> b_;
};

TEST_F(ElasticMembershipOnEtcdTest, AFailureOnOneNodeWakesTheOtherAtOnceWithoutTheClockMoving) {
  auto joined_a = std::async(std::launch::async, [this] { return a_->join(0); });
  auto joined_b = std::async(std::launch::async, [this] { return b_->join(0); });
  ASSERT_EQ(joined_a.wait_for(kHangGuard), std::future_status::ready);
  ASSERT_EQ(joined_b.wait_for(kHangGuard), std::future_status::ready);
  EXPECT_EQ(joined_a.get().nnodes, 2);
  EXPECT_EQ(joined_b.get().nnodes, 2);
  const int fd = b_->event_fd();
  ASSERT_GE(fd, 0) << "an etcd rendezvous has a descriptor too, not the keep-alive's polls";
  // etcd confirms the watch: that may wake the loop, but is no event.
  while (readable(fd, 300)) EXPECT_FALSE(b_->take_event());
  const auto before = clock_b_.elapsed();
  const JobEvent restart = a_->restart_job(0);
  EXPECT_EQ(restart.kind, JobEvent::Kind::kRestart);
  bool taken = false;
  for (int i = 0; i < 5 && !taken; ++i)
    taken = readable(fd, static_cast<int>(std::chrono::milliseconds(kHangGuard).count())) &&
            b_->take_event();
  ASSERT_TRUE(taken);
  const JobEvent seen = b_->watch(0);
  EXPECT_EQ(seen.kind, JobEvent::Kind::kMeetAgain);
  EXPECT_EQ(seen.why, "another node's workers failed; meeting again");
  EXPECT_EQ(clock_b_.elapsed(), before) << "seen without waiting for a keep-alive tick";
  EXPECT_FALSE(readable(fd, 0)) << "quiet once taken";
  auto again_a = std::async(std::launch::async, [this] { return a_->join(1); });
  auto again_b = std::async(std::launch::async, [this] { return b_->join(0); });
  ASSERT_EQ(again_a.wait_for(kHangGuard), std::future_status::ready);
  ASSERT_EQ(again_b.wait_for(kHangGuard), std::future_status::ready);
  EXPECT_EQ(again_a.get().restart_count, 1);
  EXPECT_EQ(again_b.get().restart_count, 1);
}

TEST_F(ElasticMembershipOnEtcdTest, AWatchWhoseMemberRestartedIsStartedAgainAndStillWakesTheNode) {
  auto joined_a = std::async(std::launch::async, [this] { return a_->join(0); });
  auto joined_b = std::async(std::launch::async, [this] { return b_->join(0); });
  ASSERT_EQ(joined_a.wait_for(kHangGuard), std::future_status::ready);
  ASSERT_EQ(joined_b.wait_for(kHangGuard), std::future_status::ready);
  joined_a.get();
  joined_b.get();
  const int fd = b_->event_fd();
  ASSERT_GE(fd, 0);
  while (readable(fd, 300)) EXPECT_FALSE(b_->take_event());
  // The member goes and comes back: node b's stream ends, with nothing to meet about.
  etcd_.kill();
  std::string log;
  ASSERT_TRUE(etcd_.start(log)) << "etcd did not come back:\n" << log;
  ASSERT_TRUE(readable(fd, 10'000));
  EXPECT_TRUE(b_->take_event());
  EXPECT_EQ(b_->watch(0).kind, JobEvent::Kind::kNone);
  // Its next look started the watch again on the same descriptor: a failure on node a wakes it.
  while (readable(fd, 300)) EXPECT_FALSE(b_->take_event());
  a_->restart_job(0);
  bool taken = false;
  for (int i = 0; i < 5 && !taken; ++i) taken = readable(fd, 10'000) && b_->take_event();
  ASSERT_TRUE(taken) << "the watch was not started again: the node would wait for a keep-alive";
  EXPECT_EQ(b_->watch(0).kind, JobEvent::Kind::kMeetAgain);
}

}  // namespace
}  // namespace acc::launcher
