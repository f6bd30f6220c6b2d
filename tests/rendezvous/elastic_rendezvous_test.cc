#include "acc/rendezvous/elastic_rendezvous.h"

#include <gtest/gtest.h>

#include <future>
#include <map>
#include <set>
#include <thread>

#include "acc/common/error.h"
#include "acc/rendezvous/store_client.h"
#include "acc/rendezvous/store_server.h"

namespace acc::rendezvous {
namespace {

using namespace std::chrono_literals;

class ElasticRendezvousTest : public ::testing::Test {
 protected:
  ElasticRendezvousTest() : server_(server_options()) { server_.start(); }

  static StoreServerOptions server_options() {
    StoreServerOptions options;
    options.host = "127.0.0.1";
    options.log = [](std::string_view) {};
    return options;
  }

  std::unique_ptr<StoreClient> client() {
    StoreClientOptions options;
    options.port = server_.port();
    options.timeout = 20s;
    return std::make_unique<StoreClient>(options);
  }

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

  // A node: its own connection and handler, joining on its own thread.
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

TEST_F(ElasticRendezvousTest, MaxNodesJoiningGetDistinctRanksAndCloseWithoutLastCall) {
  auto options = rendezvous(2, 4, 30s);  // a last call this long would time the test out
  std::vector<Node> nodes;
  for (int i = 0; i < 4; ++i) nodes.push_back(node(options, "node" + std::to_string(i)));
  std::vector<std::future<RendezvousInfo>> joins;
  for (auto& n : nodes) {
    joins.push_back(std::async(std::launch::async, [&n] { return n.handler->next_rendezvous(); }));
  }
  std::set<int> ranks;
  for (auto& join : joins) {
    ASSERT_EQ(join.wait_for(10s), std::future_status::ready);
    RendezvousInfo info = join.get();
    EXPECT_EQ(info.round, 0);
    EXPECT_EQ(info.num_nodes, 4);
    ranks.insert(info.node_rank);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
}

// torchrun sorts its node descriptors: ranks follow the node ids, not who got there first.
TEST_F(ElasticRendezvousTest, RanksFollowTheSortedNodeIdsWhateverTheArrivalOrder) {
  const std::vector<std::string> ids = {"10.0.0.3:77", "10.0.0.1:99", "10.0.0.2:12", "10.0.0.1:5"};
  for (int trial = 0; trial < 3; ++trial) {
    auto options = rendezvous(4, 4);
    options.run_id = "sorted" + std::to_string(trial);
    std::vector<Node> nodes;
    for (const auto& id : ids) nodes.push_back(node(options, id));
    std::vector<std::future<RendezvousInfo>> joins;
    // Arrivals in a different order each trial: rotated, one at a time.
    for (size_t k = 0; k < nodes.size(); ++k) {
      auto& n = nodes[(k + static_cast<size_t>(trial)) % nodes.size()];
      joins.push_back(
          std::async(std::launch::async, [&n] { return n.handler->next_rendezvous(); }));
      std::this_thread::sleep_for(20ms);
    }
    std::map<std::string, int> rank_of;
    for (size_t k = 0; k < nodes.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(trial)) % nodes.size();
      rank_of[ids[i]] = joins[k].get().node_rank;
    }
    EXPECT_EQ(rank_of,
              (std::map<std::string, int>{
                  {"10.0.0.1:5", 0}, {"10.0.0.1:99", 1}, {"10.0.0.2:12", 2}, {"10.0.0.3:77", 3}}))
        << "trial " << trial;
  }
}

TEST_F(ElasticRendezvousTest, LastCallAdmitsNodesArrivingBeforeItEnds) {
  auto options = rendezvous(2, 8, 600ms);
  Node a = node(options, "a"), b = node(options, "b"), c = node(options, "c");
  auto start = std::chrono::steady_clock::now();
  auto ja = std::async(std::launch::async, [&] { return a.handler->next_rendezvous(); });
  auto jb = std::async(std::launch::async, [&] { return b.handler->next_rendezvous(); });
  std::this_thread::sleep_for(100ms);
  auto jc = std::async(std::launch::async, [&] { return c.handler->next_rendezvous(); });
  RendezvousInfo ia = ja.get(), ib = jb.get(), ic = jc.get();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 600ms);
  EXPECT_EQ(ia.num_nodes, 3);
  EXPECT_EQ(ib.num_nodes, 3);
  EXPECT_EQ(ic.num_nodes, 3);
  EXPECT_EQ(std::set<int>({ia.node_rank, ib.node_rank, ic.node_rank}), (std::set<int>{0, 1, 2}));
}

TEST_F(ElasticRendezvousTest, TooFewNodesTimeOutNamingTheShortfall) {
  auto options = rendezvous(3, 3);
  options.join_timeout = 300ms;
  Node lonely = node(options, "lonely");
  try {
    lonely.handler->next_rendezvous();
    FAIL() << "a round with 1 of 3 nodes closed";
  } catch (const TimeoutError& error) {
    EXPECT_NE(std::string(error.what()).find("has 1 of the 3 nodes"), std::string::npos)
        << error.what();
  }
}

TEST_F(ElasticRendezvousTest, LateNodeWaitsAndJoinsTheNextRoundWhenParticipantsRestart) {
  auto options = rendezvous(2, 3);
  Node a = node(options, "a"), b = node(options, "b"), late = node(options, "late");
  auto ja = std::async(std::launch::async, [&] { return a.handler->next_rendezvous(); });
  auto jb = std::async(std::launch::async, [&] { return b.handler->next_rendezvous(); });
  ASSERT_EQ(ja.get().num_nodes, 2);  // closed by the last call with two of three
  ASSERT_EQ(jb.get().num_nodes, 2);

  auto jl = std::async(std::launch::async, [&] { return late.handler->next_rendezvous(); });
  // The participants see a node waiting, as an agent's monitor loop would, and restart.
  auto until = std::chrono::steady_clock::now() + 10s;
  while (a.handler->num_nodes_waiting() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(a.handler->num_nodes_waiting(), 1);
  EXPECT_EQ(jl.wait_for(100ms), std::future_status::timeout);
  auto ra = std::async(std::launch::async, [&] { return a.handler->next_rendezvous(); });
  auto rb = std::async(std::launch::async, [&] { return b.handler->next_rendezvous(); });
  RendezvousInfo ia = ra.get(), ib = rb.get(), il = jl.get();
  for (const auto& info : {ia, ib, il}) {
    EXPECT_EQ(info.round, 1);
    EXPECT_EQ(info.num_nodes, 3);
  }
  EXPECT_EQ(std::set<int>({ia.node_rank, ib.node_rank, il.node_rank}), (std::set<int>{0, 1, 2}));
}

TEST_F(ElasticRendezvousTest, AJoinWritesTheSameNumberOfKeysWhateverTheNodeCount) {
  auto measure = [&](const std::string& run, int nodes_count) {
    auto options = rendezvous(nodes_count, nodes_count);
    options.run_id = run;
    auto before = client()->num_keys();
    std::vector<Node> nodes;
    for (int i = 0; i < nodes_count; ++i) nodes.push_back(node(options, std::to_string(i)));
    std::vector<std::future<RendezvousInfo>> joins;
    for (auto& n : nodes) {
      joins.push_back(
          std::async(std::launch::async, [&n] { return n.handler->next_rendezvous(); }));
    }
    for (auto& join : joins) join.get();
    return client()->num_keys() - before;
  };
  auto keys_for_2 = measure("two", 2);
  auto keys_for_8 = measure("eight", 8);
  // Linear with a constant slope: a fixed set of round keys plus four keys per node (its id by
  // arrival slot, its rank by slot, its id by rank and its heartbeat), never a key that lists
  // every node.
  auto per_node = (keys_for_8 - keys_for_2) / 6;
  EXPECT_EQ(per_node * 6, keys_for_8 - keys_for_2);
  EXPECT_EQ(per_node, 4);
  EXPECT_EQ(keys_for_2 - 2 * per_node, 3);  // round counter, joined counter, closed count
}

TEST_F(ElasticRendezvousTest, HeartbeatsTellSilentNodes) {
  auto options = rendezvous(2, 2);
  Node a = node(options, "a"), b = node(options, "b");
  auto ja = std::async(std::launch::async, [&] { return a.handler->next_rendezvous(); });
  auto jb = std::async(std::launch::async, [&] { return b.handler->next_rendezvous(); });
  int rank_a = ja.get().node_rank;
  int rank_b = jb.get().node_rank;
  EXPECT_TRUE(a.handler->silent_nodes(150ms).empty());  // first look only records
  std::this_thread::sleep_for(200ms);
  a.handler->heartbeat();
  EXPECT_EQ(a.handler->silent_nodes(150ms), std::vector<int>{rank_b});
  b.handler->heartbeat();
  EXPECT_TRUE(a.handler->silent_nodes(150ms).empty());
  (void)rank_a;
}

TEST_F(ElasticRendezvousTest, ClosedRunRefusesNewRendezvous) {
  auto options = rendezvous(1, 1);
  Node a = node(options, "a");
  EXPECT_EQ(a.handler->next_rendezvous().num_nodes, 1);
  a.handler->close_run();
  Node b = node(options, "b");
  EXPECT_THROW(b.handler->next_rendezvous(), StoreError);
}

TEST_F(ElasticRendezvousTest, BadNodeCountsAreAConfigError) {
  auto store = client();
  EXPECT_THROW(ElasticRendezvous(*store, rendezvous(0, 1), "x"), ConfigError);
  EXPECT_THROW(ElasticRendezvous(*store, rendezvous(3, 2), "x"), ConfigError);
}

// What an agent does while its workers run, on every node, round after round: it must never
// block (this once hung the second node's connection).
TEST_F(ElasticRendezvousTest, KeepAliveChecksOnEveryNodeNeverBlock) {
  auto options = rendezvous(2, 3, 200ms);
  std::vector<Node> nodes;
  for (int i = 0; i < 2; ++i) nodes.push_back(node(options, "node" + std::to_string(i)));
  std::vector<std::future<RendezvousInfo>> joins;
  for (auto& n : nodes) {
    joins.push_back(std::async(std::launch::async, [&n] { return n.handler->next_rendezvous(); }));
  }
  for (auto& join : joins) ASSERT_EQ(join.wait_for(10s), std::future_status::ready);
  // As the launchers do: one node publishes the workers' store, the other waits for it.
  auto published = std::async(std::launch::async, [&] { return nodes[1].store->get("workers"); });
  std::this_thread::sleep_for(100ms);
  nodes[0].store->set("workers", "10.0.0.1:1234");
  ASSERT_EQ(published.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(published.get(), "10.0.0.1:1234");
  for (int tick = 0; tick < 5; ++tick) {
    for (auto& n : nodes) {
      auto check = std::async(std::launch::async, [&n] {
        n.handler->heartbeat();
        EXPECT_EQ(n.handler->num_nodes_waiting(), 0);
        EXPECT_FALSE(n.handler->superseded());
        EXPECT_TRUE(n.handler->silent_nodes(10s).empty());
      });
      ASSERT_EQ(check.wait_for(5s), std::future_status::ready) << "tick " << tick << " blocked";
    }
  }
}

}  // namespace
}  // namespace acc::rendezvous
