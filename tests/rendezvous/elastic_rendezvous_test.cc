#include "acc/rendezvous/elastic_rendezvous.h"

#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "acc/common/error.h"
#include "acc/rendezvous/store_client.h"
#include "acc/rendezvous/store_server.h"
#include "memory_store.h"

namespace acc::rendezvous {
namespace {

using namespace std::chrono_literals;

// A hang guard for a future that the test expects to be ready: generous, never a window a passing
// test waits out.
constexpr auto kHangGuard = 20s;

RendezvousOptions rendezvous(int min_nodes, int max_nodes,
                             std::chrono::milliseconds last_call = 300ms) {
  RendezvousOptions options;
  options.run_id = "job";
  options.min_nodes = min_nodes;
  options.max_nodes = max_nodes;
  options.last_call_timeout = last_call;
  options.join_timeout = 10s;
  return options;
}

template <typename T>
bool ready(std::future<T>& future) {
  return future.wait_for(0s) == std::future_status::ready;
}

// The future's result; throws (failing the test, never hanging it) when it is not ready within the
// hang guard.
template <typename T>
T result(std::future<T>& future) {
  if (future.wait_for(kHangGuard) != std::future_status::ready)
    throw std::runtime_error("no result within the hang guard: the node hangs");
  return future.get();
}

// The rounds' logic over an in-memory store whose time moves only when the test says: each node
// joins on its own thread, the test waits until the nodes it expects are blocked on the store,
// and timeouts pass by advancing the store's clock.
class ElasticRendezvousTest : public ::testing::Test {
 protected:
  // A node on the store and its clock, owned by the fixture so that it outlives its threads.
  ElasticRendezvous* node(const RendezvousOptions& options, const std::string& id) {
    nodes_.push_back(std::make_unique<ElasticRendezvous>(store_, options, id, store_));
    return nodes_.back().get();
  }

  std::future<RendezvousInfo> join_after_failure(ElasticRendezvous& node) {
    auto task = std::make_shared<std::packaged_task<RendezvousInfo()>>(
        [&node] { return node.next_rendezvous(true); });
    auto future = task->get_future();
    threads_.emplace_back([task] { (*task)(); });
    return future;
  }

  // Nodes a and b meet in round 0 with a spare waiting beside them, whose `gone` says true for
  // the id `gone_id` only; then a fails and meets again, and b never comes back. Returns a's and
  // the spare's joins.
  std::pair<std::future<RendezvousInfo>, std::future<RendezvousInfo>>
  a_fails_after_a_round_of_a_and_b_beside_a_spare(RendezvousOptions options,
                                                  const std::string& gone_id) {
    auto a = node(options, "a"), b = node(options, "b");
    options.gone = [gone_id](const std::string& id) { return id == gone_id; };
    auto spare = node(options, "spare");
    auto ja = join(*a), jb = join(*b);
    result(ja);
    result(jb);
    auto js = join(*spare);
    EXPECT_TRUE(store_.await_blocked(1));
    return {join_after_failure(*a), std::move(js)};
  }

  // Starts `node` joining on a thread of its own. The future does not block when destroyed, so a
  // failed assertion returns; TearDown() then ends the calls left blocked and joins the threads.
  std::future<RendezvousInfo> join(ElasticRendezvous& node) {
    auto task = std::make_shared<std::packaged_task<RendezvousInfo()>>(
        [&node] { return node.next_rendezvous(); });
    auto future = task->get_future();
    threads_.emplace_back([task] { (*task)(); });
    return future;
  }

  void TearDown() override {
    store_.close();
    for (auto& thread : threads_) thread.join();
  }

  MemoryStore store_;
  std::vector<std::unique_ptr<ElasticRendezvous>> nodes_;
  std::vector<std::thread> threads_;
};

TEST_F(ElasticRendezvousTest, MaxNodesJoiningGetDistinctRanksAndCloseWithoutLastCall) {
  auto options = rendezvous(2, 4, 30s);  // time never moves: only max_nodes can close the round
  std::vector<ElasticRendezvous*> nodes;
  for (int i = 0; i < 4; ++i) nodes.push_back(node(options, "node" + std::to_string(i)));
  std::vector<std::future<RendezvousInfo>> joins;
  for (auto& n : nodes) joins.push_back(join(*n));
  std::set<int> ranks;
  for (auto& j : joins) {
    RendezvousInfo info = result(j);
    EXPECT_EQ(info.round, 0);
    EXPECT_EQ(info.num_nodes, 4);
    ranks.insert(info.node_rank);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
}

// torchrun sorts its node descriptors: ranks follow the node ids, not who got there first.
TEST_F(ElasticRendezvousTest, RanksFollowTheSortedNodeIdsWhateverTheArrivalOrder) {
  const std::vector<std::string> ids = {"10.0.0.3:77", "10.0.0.1:99", "10.0.0.2:12", "10.0.0.1:5"};
  for (size_t trial = 0; trial < ids.size(); ++trial) {
    auto options = rendezvous(4, 4);
    options.run_id = "sorted" + std::to_string(trial);
    std::vector<ElasticRendezvous*> nodes;
    for (const auto& id : ids) nodes.push_back(node(options, id));
    // Arrivals rotated by one each trial, each node blocked on the round before the next comes.
    std::map<std::string, std::future<RendezvousInfo>> joins;
    for (size_t k = 0; k < nodes.size(); ++k) {
      const size_t i = (k + trial) % nodes.size();
      joins[ids[i]] = join(*nodes[i]);
      if (k + 1 < nodes.size()) {
        ASSERT_TRUE(store_.await_blocked(static_cast<int>(k + 1)));
      }
    }
    std::map<std::string, int> rank_of;
    for (auto& [id, j] : joins) {
      ASSERT_EQ(j.wait_for(kHangGuard), std::future_status::ready);
      rank_of[id] = result(j).node_rank;
    }
    EXPECT_EQ(rank_of,
              (std::map<std::string, int>{
                  {"10.0.0.1:5", 0}, {"10.0.0.1:99", 1}, {"10.0.0.2:12", 2}, {"10.0.0.3:77", 3}}))
        << "trial " << trial;
  }
}

// Stable ranks: a node that asks for a rank (--node_rank) keeps it whatever the arrival order,
// above the store's server (which asks for 0 unless another node does); a rank beyond the round,
// or taken by a higher claim, falls back to the ranks left, with one line.
TEST_F(ElasticRendezvousTest, ANodeKeepsTheRankItAskedForWhateverTheArrivalOrder) {
  using Claim = RendezvousOptions::Claim;
  struct Node {
    std::string id;
    int want;
    Claim claim;
  };
  const std::vector<Node> nodes_of_the_job = {{"10.0.0.1:5", 0, Claim::kServesTheStore},
                                              {"10.0.0.9:1", 0, Claim::kAsked},
                                              {"10.0.0.2:3", 7, Claim::kAsked},
                                              {"10.0.0.3:4", -1, Claim::kNone}};
  std::vector<std::string> lines;
  for (size_t trial = 0; trial < nodes_of_the_job.size(); ++trial) {
    std::vector<ElasticRendezvous*> nodes;
    for (const Node& n : nodes_of_the_job) {
      auto options = rendezvous(4, 4);
      options.run_id = "stable" + std::to_string(trial);
      options.wanted_rank = n.want;
      options.claim = n.claim;
      options.log = [&lines, id = n.id](std::string_view line) {
        lines.push_back(id + ": " + std::string(line));
      };
      nodes.push_back(node(options, n.id));
    }
    std::map<std::string, std::future<RendezvousInfo>> joins;
    for (size_t k = 0; k < nodes.size(); ++k) {
      const size_t i = (k + trial) % nodes.size();  // the node asking for 0 arrives last once
      joins[nodes_of_the_job[i].id] = join(*nodes[i]);
      if (k + 1 < nodes.size()) {
        ASSERT_TRUE(store_.await_blocked(static_cast<int>(k + 1)));
      }
    }
    std::map<std::string, int> rank_of;
    for (auto& [id, j] : joins) rank_of[id] = result(j).node_rank;
    // 10.0.0.9 asked for 0 and gets it over the store's server; 10.0.0.2 asked for 7 of 4 and
    // takes the lowest rank left in id order, as the others do.
    EXPECT_EQ(rank_of,
              (std::map<std::string, int>{
                  {"10.0.0.9:1", 0}, {"10.0.0.1:5", 1}, {"10.0.0.2:3", 2}, {"10.0.0.3:4", 3}}))
        << "trial " << trial;
  }
  ASSERT_EQ(lines.size(), nodes_of_the_job.size()) << "one line per trial, for the rank 7";
  EXPECT_EQ(lines[0],
            "10.0.0.2:3: node rank 7 (--node_rank) is not this node's in round 0 of 4 node(s): "
            "the round has no such rank; this node is node 2");
}

// The node serving the store holds rank 0 where no node asks for it, whatever its id.
TEST_F(ElasticRendezvousTest, TheStoresServerHoldsRankZeroUnlessAnotherNodeAsks) {
  auto serving = rendezvous(2, 2);
  serving.wanted_rank = 0;
  serving.claim = RendezvousOptions::Claim::kServesTheStore;
  ElasticRendezvous* server = node(serving, "z-host:9");
  ElasticRendezvous* other = node(rendezvous(2, 2), "a-host:1");
  auto first = join(*other);
  ASSERT_TRUE(store_.await_blocked(1));
  auto second = join(*server);
  EXPECT_EQ(result(second).node_rank, 0);
  EXPECT_EQ(result(first).node_rank, 1);
}

TEST_F(ElasticRendezvousTest, LastCallAdmitsNodesArrivingBeforeItEnds) {
  auto options = rendezvous(2, 8, 600ms);
  auto a = node(options, "a"), b = node(options, "b"), c = node(options, "c");
  auto ja = join(*a), jb = join(*b);
  ASSERT_TRUE(store_.await_blocked(2));  // the minimum is in: the last call runs
  store_.advance(599ms);
  ASSERT_TRUE(store_.await_blocked(2)) << "the round closed before its last call ended";
  auto jc = join(*c);
  ASSERT_TRUE(store_.await_blocked(3));
  store_.advance(1ms);
  RendezvousInfo ia = result(ja), ib = result(jb), ic = result(jc);
  EXPECT_EQ(ia.num_nodes, 3);
  EXPECT_EQ(ib.num_nodes, 3);
  EXPECT_EQ(ic.num_nodes, 3);
  EXPECT_EQ(std::set<int>({ia.node_rank, ib.node_rank, ic.node_rank}), (std::set<int>{0, 1, 2}));
}

TEST_F(ElasticRendezvousTest, TooFewNodesTimeOutNamingTheShortfall) {
  auto options = rendezvous(3, 3);
  options.join_timeout = 300ms;
  auto lonely = node(options, "lonely");
  auto j = join(*lonely);
  ASSERT_TRUE(store_.await_blocked(1));
  store_.advance(299ms);
  ASSERT_TRUE(store_.await_blocked(1)) << "gave up before join_timeout";
  store_.advance(1ms);
  ASSERT_EQ(j.wait_for(kHangGuard), std::future_status::ready);
  try {
    result(j);
    FAIL() << "a round with 1 of 3 nodes closed";
  } catch (const TimeoutError& error) {
    EXPECT_NE(std::string(error.what()).find("has 1 of the 3 nodes"), std::string::npos)
        << error.what();
  }
}

TEST_F(ElasticRendezvousTest, LateNodeWaitsAndJoinsTheNextRoundWhenParticipantsRestart) {
  auto options = rendezvous(2, 3);
  auto a = node(options, "a"), b = node(options, "b"), late = node(options, "late");
  auto ja = join(*a), jb = join(*b);
  ASSERT_TRUE(store_.await_blocked(2));
  store_.advance(options.last_call_timeout);  // closes the round with two of three
  ASSERT_EQ(result(ja).num_nodes, 2);
  ASSERT_EQ(result(jb).num_nodes, 2);

  auto jl = join(*late);
  ASSERT_TRUE(store_.await_blocked(1));  // the late node waits for a next round
  // The participants see a node waiting, as an agent's monitor loop would, and restart.
  EXPECT_EQ(a->num_nodes_waiting(), 1);
  EXPECT_EQ(b->num_nodes_waiting(), 1);
  EXPECT_FALSE(ready(jl));
  auto ra = join(*a), rb = join(*b);
  RendezvousInfo ia = result(ra), ib = result(rb), il = result(jl);
  for (const auto& info : {ia, ib, il}) {
    EXPECT_EQ(info.round, 1);
    EXPECT_EQ(info.num_nodes, 3);
  }
  EXPECT_EQ(std::set<int>({ia.node_rank, ib.node_rank, il.node_rank}), (std::set<int>{0, 1, 2}));
  EXPECT_EQ(a->num_nodes_waiting(), 0);
}

TEST_F(ElasticRendezvousTest, ALateNodeGivesUpWhenNoNextRoundOpensWithinTheJoinTimeout) {
  auto options = rendezvous(1, 2);
  auto a = node(options, "a"), late = node(options, "late");
  auto ja = join(*a);
  ASSERT_TRUE(store_.await_blocked(1));
  store_.advance(options.last_call_timeout);  // closes the round with one of two
  ASSERT_EQ(result(ja).num_nodes, 1);
  auto jl = join(*late);
  ASSERT_TRUE(store_.await_blocked(1));
  store_.advance(options.join_timeout);
  try {
    result(jl);
    FAIL() << "the late node joined a closed round";
  } catch (const TimeoutError& error) {
    EXPECT_NE(std::string(error.what()).find("no next round opened"), std::string::npos)
        << error.what();
  }
}

// Three nodes for at most two: the third is a spare. It is not a node waiting to join (which
// would make the participants meet again, and leave one out again), and it waits past any
// join timeout while the round runs.
TEST_F(ElasticRendezvousTest, ASpareOfAFullRoundNeitherDisturbsItNorTimesOut) {
  auto options = rendezvous(1, 2);
  auto a = node(options, "a"), b = node(options, "b"), spare = node(options, "spare");
  auto ja = join(*a), jb = join(*b);
  ASSERT_EQ(result(ja).round, 0);
  ASSERT_EQ(result(jb).num_nodes, 2);
  auto js = join(*spare);
  ASSERT_TRUE(store_.await_blocked(1));
  EXPECT_EQ(a->num_nodes_waiting(), 0);
  EXPECT_EQ(b->num_nodes_waiting(), 0);
  store_.advance(options.join_timeout * 3);
  ASSERT_TRUE(store_.await_blocked(1));
  EXPECT_FALSE(ready(js)) << "the spare gave up while the round ran";
  EXPECT_FALSE(a->superseded());
  // The job ends: the spare learns that it was never needed.
  a->close_run();
  try {
    result(js);
    FAIL() << "the spare joined a closed run";
  } catch (const RendezvousClosedError& error) {
    EXPECT_TRUE(error.was_spare());
  }
}

// A participant fails and meets again; the other participant is gone. The spare lets the
// previous participants rejoin first (spare_delay), then takes the free place. The new round's
// restart count is 1 on both nodes, the spare included.
TEST_F(ElasticRendezvousTest, ASpareTakesTheFreePlaceAfterAFailureAndSharesTheRestartCount) {
  auto options = rendezvous(1, 2, 300ms);
  options.spare_delay = 100ms;
  auto a = node(options, "a"), b = node(options, "b"), spare = node(options, "spare");
  auto ja = join(*a), jb = join(*b);
  ASSERT_EQ(result(ja).restart_count, 0);
  ASSERT_EQ(result(jb).restart_count, 0);
  auto js = join(*spare);
  ASSERT_TRUE(store_.await_blocked(1));
  auto again = join_after_failure(*a);   // b never comes back
  ASSERT_TRUE(store_.await_blocked(2));  // a in its last call, the spare in its delay
  store_.advance(99ms);
  ASSERT_TRUE(store_.await_blocked(2));
  EXPECT_FALSE(ready(js)) << "the spare took a place before spare_delay";
  store_.advance(1ms);
  RendezvousInfo ia = result(again), is = result(js);
  EXPECT_EQ(ia.round, 1);
  EXPECT_EQ(is.round, 1);
  EXPECT_EQ(ia.num_nodes, 2);
  EXPECT_EQ(std::set<int>({ia.node_rank, is.node_rank}), (std::set<int>{0, 1}));
  EXPECT_EQ(ia.restart_count, 1);
  EXPECT_EQ(is.restart_count, 1);
}

// As above, but the spare knows that b is gone (RendezvousOptions::gone: b's launcher ran on
// the spare's machine and has exited): it takes b's place without waiting for spare_delay.
TEST_F(ElasticRendezvousTest, ASpareTakesAGoneParticipantsPlaceWithoutWaiting) {
  auto options = rendezvous(1, 2, 300ms);
  options.spare_delay = 10s;
  auto [again, js] = a_fails_after_a_round_of_a_and_b_beside_a_spare(options, "b");
  // The spare looked before a's slot came (both wait: one look later, 250 ms, far under
  // spare_delay), or after it (both are through).
  for (int i = 0; i < 200 && !(ready(again) && ready(js)); ++i)
    if (store_.await_blocked(2, 100ms)) {
      store_.advance(250ms);
      break;
    }
  RendezvousInfo ia = result(again), is = result(js);
  EXPECT_EQ(is.round, 1);
  EXPECT_EQ(ia.num_nodes, 2);
  EXPECT_EQ(std::set<int>({ia.node_rank, is.node_rank}), (std::set<int>{0, 1}));
}

// A participant that is not known gone keeps its place for spare_delay: a's coming back is not
// enough while b is alive.
TEST_F(ElasticRendezvousTest, ASpareWaitsForAParticipantThatIsNotKnownGone) {
  auto options = rendezvous(1, 2, 5s);
  options.spare_delay = 1s;
  auto [again, js] = a_fails_after_a_round_of_a_and_b_beside_a_spare(options, "elsewhere");
  ASSERT_TRUE(store_.await_blocked(2));
  store_.advance(750ms);
  ASSERT_TRUE(store_.await_blocked(2));
  EXPECT_FALSE(ready(js)) << "the spare took the place of a participant not known gone";
}

// Both participants come back (one failed, the other saw the round superseded): they fill the
// next round and the spare stays a spare.
TEST_F(ElasticRendezvousTest, ThePreviousParticipantsComeBeforeTheSpare) {
  auto options = rendezvous(1, 2);
  options.spare_delay = 100ms;
  auto a = node(options, "a"), b = node(options, "b"), spare = node(options, "spare");
  auto ja = join(*a), jb = join(*b);
  result(ja);
  result(jb);
  auto js = join(*spare);
  ASSERT_TRUE(store_.await_blocked(1));
  auto ra = join_after_failure(*a);
  ASSERT_TRUE(store_.await_blocked(2));
  ASSERT_TRUE(b->superseded());
  auto rb = join(*b);
  RendezvousInfo ia = result(ra), ib = result(rb);
  EXPECT_EQ(ia.num_nodes, 2);
  EXPECT_EQ(ib.num_nodes, 2);
  EXPECT_EQ(ia.restart_count, 1);
  EXPECT_EQ(ib.restart_count, 1);
  ASSERT_TRUE(store_.await_blocked(1));  // the spare waits for round 2 now
  store_.advance(options.join_timeout * 2);
  ASSERT_TRUE(store_.await_blocked(1));
  EXPECT_FALSE(ready(js));
}

// Nobody is left to meet again when every participant died: the spare opens the next round.
TEST_F(ElasticRendezvousTest, ASpareOpensTheNextRoundWhenEveryParticipantWentSilent) {
  auto options = rendezvous(1, 2, 100ms);
  options.keep_alive_timeout = 300ms;
  options.spare_delay = 100ms;
  auto a = node(options, "a"), b = node(options, "b"), spare = node(options, "spare");
  auto ja = join(*a), jb = join(*b);
  result(ja);
  result(jb);
  auto js = join(*spare);
  ASSERT_TRUE(store_.await_blocked(1));
  for (int step = 0; step < 3; ++step) {  // a and b beat for a while
    a->heartbeat();
    b->heartbeat();
    store_.advance(100ms);
    ASSERT_TRUE(store_.await_blocked(1));
  }
  store_.advance(200ms);  // then stop: 200 ms of silence is not yet enough
  ASSERT_TRUE(store_.await_blocked(1));
  EXPECT_FALSE(a->superseded()) << "the spare opened a round while the participants lived";
  store_.advance(100ms);  // 300 ms: the spare opens round 1, and waits its spare_delay
  ASSERT_TRUE(store_.await_blocked(1));
  EXPECT_TRUE(a->superseded());
  store_.advance(100ms);  // then takes a place, and the last call runs
  ASSERT_TRUE(store_.await_blocked(1));
  store_.advance(100ms);
  RendezvousInfo info = result(js);
  EXPECT_EQ(info.round, 1);
  EXPECT_EQ(info.num_nodes, 1);
  EXPECT_EQ(info.restart_count, 1);
}

// torchrun's TORCHELASTIC_RESTART_COUNT counts failures only: a round that let a node in is
// not a restart.
TEST_F(ElasticRendezvousTest, TheRestartCountCountsFailedRoundsOnly) {
  auto options = rendezvous(1, 3);
  auto a = node(options, "a"), b = node(options, "b");
  auto ja = join(*a);
  ASSERT_TRUE(store_.await_blocked(1));
  store_.advance(options.last_call_timeout);
  ASSERT_EQ(result(ja).num_nodes, 1);
  auto jb = join(*b);
  ASSERT_TRUE(store_.await_blocked(1));
  ASSERT_EQ(a->num_nodes_waiting(), 1);
  auto ra = join(*a);  // meets again to let b in
  ASSERT_TRUE(store_.await_blocked(2));
  store_.advance(options.last_call_timeout);
  RendezvousInfo ia = result(ra), ib = result(jb);
  EXPECT_EQ(ia.round, 1);
  EXPECT_EQ(ia.num_nodes, 2);
  EXPECT_EQ(ia.restart_count, 0);
  EXPECT_EQ(ib.restart_count, 0);
  auto fa = join_after_failure(*a), fb = join(*b);
  ASSERT_TRUE(store_.await_blocked(2));
  store_.advance(options.last_call_timeout);
  EXPECT_EQ(result(fa).restart_count, 1);
  EXPECT_EQ(result(fb).restart_count, 1);
}

// The launcher's SIGINT/SIGTERM: every wait looks at the stop check at least every 100 ms.
TEST_F(ElasticRendezvousTest, AStopCheckEndsAWaitWithinOneSlice) {
  auto options = rendezvous(2, 2);
  auto lonely = node(options, "lonely");
  std::atomic<bool> stop{false};
  lonely->set_stop_check([&] {
    if (stop) throw InterruptedError(SIGTERM, "stopped");
  });
  auto j = join(*lonely);
  ASSERT_TRUE(store_.await_blocked(1));
  stop = true;
  store_.advance(100ms);
  EXPECT_THROW(result(j), InterruptedError);
}

TEST_F(ElasticRendezvousTest, HeartbeatsTellSilentNodes) {
  auto options = rendezvous(2, 2);
  auto a = node(options, "a"), b = node(options, "b");
  auto ja = join(*a), jb = join(*b);
  result(ja);
  const int rank_b = result(jb).node_rank;
  EXPECT_TRUE(a->silent_nodes(150ms).empty());  // the first look only records
  store_.advance(149ms);
  EXPECT_TRUE(a->silent_nodes(150ms).empty());
  store_.advance(1ms);
  a->heartbeat();
  EXPECT_EQ(a->silent_nodes(150ms), std::vector<int>{rank_b});
  b->heartbeat();
  EXPECT_TRUE(a->silent_nodes(150ms).empty());
}

TEST_F(ElasticRendezvousTest, AParticipantMeetingAgainSupersedesTheRound) {
  auto options = rendezvous(2, 2);
  auto a = node(options, "a"), b = node(options, "b");
  auto ja = join(*a), jb = join(*b);
  ASSERT_EQ(result(ja).round, 0);
  ASSERT_EQ(result(jb).round, 0);
  EXPECT_FALSE(b->superseded());
  auto again = join(*a);  // a's workers failed: it opens round 1
  ASSERT_TRUE(store_.await_blocked(1));
  EXPECT_TRUE(b->superseded());
  auto jb2 = join(*b);
  EXPECT_EQ(result(again).round, 1);
  EXPECT_EQ(result(jb2).round, 1);
}

// A spare that has not seen the close (its launcher frozen) holds close_run() for the linger, on
// the rendezvous's clock: not a moment less, and no longer.
TEST_F(ElasticRendezvousTest, CloseRunLingersForASpareUpToTheLingerOnTheRendezvousClock) {
  auto a = node(rendezvous(1, 1), "a");
  auto ja = join(*a);
  ASSERT_EQ(result(ja).num_nodes, 1);
  store_.add(a->run_scope() + "spares", 1);
  auto task = std::make_shared<std::packaged_task<void()>>([a] { a->close_run(5s); });
  auto closed = task->get_future();
  threads_.emplace_back([task] { (*task)(); });
  ASSERT_TRUE(store_.await_blocked(1));
  store_.advance(4990ms);
  ASSERT_TRUE(store_.await_blocked(1));
  EXPECT_FALSE(ready(closed)) << "the spare has not seen the close and the linger is not over";
  store_.advance(10ms);
  result(closed);
}

TEST_F(ElasticRendezvousTest, CloseRunWithoutSparesDoesNotLinger) {
  auto a = node(rendezvous(1, 1), "a");
  auto ja = join(*a);
  ASSERT_EQ(result(ja).num_nodes, 1);
  a->close_run(5s);  // the store's time never moves: a linger would hang here
}

TEST_F(ElasticRendezvousTest, AClosedRunWakesItsNodesAndANewNodeStartsTheNextRun) {
  auto options = rendezvous(1, 2, 300ms);
  auto a = node(options, "a"), late = node(options, "late");
  auto ja = join(*a);
  ASSERT_TRUE(store_.await_blocked(1));
  store_.advance(300ms);
  ASSERT_EQ(result(ja).num_nodes, 1);
  auto jl = join(*late);
  ASSERT_TRUE(store_.await_blocked(1));
  a->close_run();
  EXPECT_THROW(result(jl), RendezvousClosedError);
  // A participant of the closed run meeting again: the job is over, and not for want of it.
  try {
    a->next_rendezvous();
    FAIL() << "a node of the closed run met again";
  } catch (const RendezvousClosedError& error) {
    EXPECT_FALSE(error.was_spare());
  }
  // The same command again, with the same run id: a new run, from round 0.
  auto b = node(options, "b");
  auto jb = join(*b);
  ASSERT_TRUE(store_.await_blocked(1));
  store_.advance(300ms);
  RendezvousInfo ib = result(jb);
  EXPECT_EQ(ib.round, 0);
  EXPECT_EQ(ib.num_nodes, 1);
  EXPECT_EQ(ib.restart_count, 0);
}

TEST_F(ElasticRendezvousTest, BadNodeCountsAreAConfigError) {
  EXPECT_THROW(ElasticRendezvous(store_, rendezvous(0, 1), "x"), ConfigError);
  EXPECT_THROW(ElasticRendezvous(store_, rendezvous(3, 2), "x"), ConfigError);
}

TEST_F(ElasticRendezvousTest, AJoinWritesTheSameNumberOfKeysWhateverTheNodeCount) {
  auto measure = [&](const std::string& run, int nodes_count) {
    auto options = rendezvous(nodes_count, nodes_count);
    options.run_id = run;
    const auto before = store_.num_keys();
    std::vector<ElasticRendezvous*> nodes;
    for (int i = 0; i < nodes_count; ++i) nodes.push_back(node(options, std::to_string(i)));
    std::vector<std::future<RendezvousInfo>> joins;
    for (auto& n : nodes) joins.push_back(join(*n));
    for (auto& j : joins) result(j);
    return store_.num_keys() - before;
  };
  const auto keys_for_2 = measure("two", 2);
  const auto keys_for_8 = measure("eight", 8);
  // Linear with a constant slope: a fixed set of round keys plus four keys per node (its id by
  // arrival slot, its rank by slot, its id by rank and its heartbeat), never a key that lists
  // every node.
  const auto per_node = (keys_for_8 - keys_for_2) / 6;
  EXPECT_EQ(per_node * 6, keys_for_8 - keys_for_2);
  EXPECT_EQ(per_node, 4u);
  // The run's generation, and the round counter, joined counter, closed count, restart count.
  EXPECT_EQ(keys_for_2 - 2 * per_node, 5u);
}

// The same rounds over our real store server on a loopback port the kernel picked, each node with
// its own connection, on the steady clock: what the launchers run.
class ElasticRendezvousOverStoreServerTest : public ::testing::Test {
 protected:
  ElasticRendezvousOverStoreServerTest() : server_(server_options()) { server_.start(); }

  static StoreServerOptions server_options() {
    StoreServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.log = [](std::string_view) {};
    return options;
  }

  std::unique_ptr<StoreClient> client() {
    StoreClientOptions options;
    options.port = server_.port();
    options.timeout = 20s;
    return std::make_unique<StoreClient>(options);
  }

  struct Node {
    std::unique_ptr<StoreClient> store;
    std::unique_ptr<ElasticRendezvous> handler;
  };
  Node node(const RendezvousOptions& options, const std::string& id) {
    Node n{client(), nullptr};
    n.handler = std::make_unique<ElasticRendezvous>(*n.store, options, id);
    return n;
  }

  StoreServer server_;
};

TEST_F(ElasticRendezvousOverStoreServerTest, MaxNodesJoiningGetDistinctRanks) {
  auto options = rendezvous(2, 4, 30s);  // a last call this long would time the test out
  std::vector<Node> nodes;
  for (int i = 0; i < 4; ++i) nodes.push_back(node(options, "node" + std::to_string(i)));
  std::vector<std::future<RendezvousInfo>> joins;
  for (auto& n : nodes) {
    joins.push_back(std::async(std::launch::async, [&n] { return n.handler->next_rendezvous(); }));
  }
  std::set<int> ranks;
  for (auto& j : joins) {
    ASSERT_EQ(j.wait_for(kHangGuard), std::future_status::ready);
    RendezvousInfo info = j.get();
    EXPECT_EQ(info.num_nodes, 4);
    ranks.insert(info.node_rank);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
}

// A standalone store outlives the job: the same run id runs again once the last run closed.
TEST_F(ElasticRendezvousOverStoreServerTest, TheSameRunIdRunsAgainAfterTheRunClosed) {
  auto options = rendezvous(1, 1);
  for (int run = 0; run < 2; ++run) {
    Node a = node(options, "a");
    RendezvousInfo info = a.handler->next_rendezvous();
    EXPECT_EQ(info.round, 0) << "run " << run;
    EXPECT_EQ(info.num_nodes, 1) << "run " << run;
    a.handler->close_run();
    EXPECT_THROW(a.handler->next_rendezvous(), RendezvousClosedError);
  }
}

// What an agent does while its workers run, on every node, round after round: it must never
// block (this once hung the second node's connection).
TEST_F(ElasticRendezvousOverStoreServerTest, KeepAliveChecksOnEveryNodeNeverBlock) {
  auto options = rendezvous(2, 2);
  std::vector<Node> nodes;
  for (int i = 0; i < 2; ++i) nodes.push_back(node(options, "node" + std::to_string(i)));
  std::vector<std::future<RendezvousInfo>> joins;
  for (auto& n : nodes) {
    joins.push_back(std::async(std::launch::async, [&n] { return n.handler->next_rendezvous(); }));
  }
  for (auto& j : joins) ASSERT_EQ(j.wait_for(kHangGuard), std::future_status::ready);
  // As the launchers do: one node publishes the workers' store, the other waits for it.
  auto published = std::async(std::launch::async, [&] { return nodes[1].store->get("workers"); });
  nodes[0].store->set("workers", "10.0.0.1:1234");
  ASSERT_EQ(published.wait_for(kHangGuard), std::future_status::ready);
  EXPECT_EQ(published.get(), "10.0.0.1:1234");
  for (int tick = 0; tick < 5; ++tick) {
    for (auto& n : nodes) {
      auto check = std::async(std::launch::async, [&n] {
        n.handler->heartbeat();
        EXPECT_EQ(n.handler->num_nodes_waiting(), 0);
        EXPECT_FALSE(n.handler->superseded());
        EXPECT_TRUE(n.handler->silent_nodes(10s).empty());
      });
      ASSERT_EQ(check.wait_for(kHangGuard), std::future_status::ready)
          << "tick " << tick << " blocked";
    }
  }
}

}  // namespace
}  // namespace acc::rendezvous
