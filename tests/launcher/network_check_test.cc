// --network_check's verdicts over every node's measures (pure).

#include "nodes/network_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace acc::launcher {
namespace {

constexpr double kNetFast = 1e9;  // bytes per second
constexpr double kNetRtt = 50e-6;

// Node `node` of `count`, whose links carry `rates[peer]` towards each peer.
NodeMeasures net_node_measures(int node, const std::vector<double>& rates, double compute = 0.1) {
  NodeMeasures m;
  m.node = node;
  m.host = "host-" + std::to_string(node);
  m.compute_seconds = compute;
  for (int peer = 0; peer < static_cast<int>(rates.size()); ++peer) {
    if (peer == node) continue;
    PeerMeasure p;
    p.node = peer;
    p.reached = rates[static_cast<size_t>(peer)] > 0;
    p.bytes_per_second = rates[static_cast<size_t>(peer)];
    p.latency_seconds = kNetRtt;
    m.peers.push_back(p);
  }
  return m;
}

// Three nodes, every link fast, except that node `slow`'s own sends run at `slow_rate`.
std::vector<NodeMeasures> net_three_nodes_slow_sender(int slow, double slow_rate) {
  std::vector<NodeMeasures> all;
  for (int node = 0; node < 3; ++node)
    all.push_back(
        net_node_measures(node, std::vector<double>(3, node == slow ? slow_rate : kNetFast)));
  return all;
}

TEST(NetworkCheckTest, AllFastNodesAreOk) {
  const NetworkJudgement j = judge_network(net_three_nodes_slow_sender(-1, 0), 3, 3);
  EXPECT_TRUE(j.judged);
  EXPECT_TRUE(j.faulty().empty());
  EXPECT_EQ(decide_network(j, 2, true).why, "");
}

TEST(NetworkCheckTest, ANodeWhoseLinksAreSlowOneWayIsFaulty) {
  // Only its sends are slow (a shaped egress): each pair is as fast as its slower direction.
  const NetworkJudgement j = judge_network(net_three_nodes_slow_sender(1, kNetFast / 10), 3, 3);
  ASSERT_EQ(j.faulty(), std::vector<int>{1});
  EXPECT_EQ(j.nodes[1].verdict, NetworkVerdict::kSlowLink);
  EXPECT_NE(j.nodes[1].why.find("100.0 MB/s"), std::string::npos) << j.nodes[1].why;
  EXPECT_EQ(j.nodes[0].verdict, NetworkVerdict::kOk);
  EXPECT_EQ(j.nodes[2].verdict, NetworkVerdict::kOk);
}

TEST(NetworkCheckTest, EachNodeMeasuresEveryOtherUpToFiveNodesAndItsFourNeighboursBeyond) {
  EXPECT_EQ(probe_peers(0, 1), std::vector<int>{});
  EXPECT_EQ(probe_peers(0, 2), std::vector<int>{1});
  EXPECT_EQ(probe_peers(1, 3), (std::vector<int>{2, 0}));
  EXPECT_EQ(probe_peers(0, 4), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(probe_peers(4, 5), (std::vector<int>{0, 1, 3, 2}));
  EXPECT_EQ(probe_peers(0, 1000), (std::vector<int>{1, 2, 999, 998}));
  // Every pair is measured from both of its ends, as a pair's verdict needs.
  for (int n : {3, 4, 5, 6, 7, 100})
    for (int a = 0; a < n; ++a)
      for (int b : probe_peers(a, n)) {
        const std::vector<int> back = probe_peers(b, n);
        EXPECT_NE(std::find(back.begin(), back.end(), a), back.end())
            << a << " " << b << " of " << n;
      }
}

TEST(NetworkCheckTest, OfAThousandNodesMeasuringTheirNeighboursTheSlowOneIsTheOnlyFaulty) {
  constexpr int kNodes = 1000;
  constexpr int kSlow = 500;
  std::vector<NodeMeasures> all;
  for (int node = 0; node < kNodes; ++node) {
    NodeMeasures m = net_node_measures(node, {});
    for (int peer : probe_peers(node, kNodes)) {
      PeerMeasure p;
      p.node = peer;
      p.reached = true;
      p.bytes_per_second = node == kSlow || peer == kSlow ? kNetFast / 10 : kNetFast;
      p.latency_seconds = kNetRtt;
      m.peers.push_back(p);
    }
    all.push_back(m);
  }
  EXPECT_EQ(judge_network(all, kNodes, 3).faulty(), std::vector<int>{kSlow});
}

TEST(NetworkCheckTest, ANodeSlowerThanTheFactorIsNotFaulty) {
  EXPECT_TRUE(judge_network(net_three_nodes_slow_sender(2, kNetFast / 2.5), 3, 3).faulty().empty());
}

TEST(NetworkCheckTest, TheOrderOfTheMeasuresDoesNotMatter) {
  std::vector<NodeMeasures> all = net_three_nodes_slow_sender(0, kNetFast / 10);
  std::reverse(all.begin(), all.end());
  EXPECT_EQ(judge_network(all, 3, 3).faulty(), std::vector<int>{0});
}

TEST(NetworkCheckTest, ASlowComputationIsFaulty) {
  std::vector<NodeMeasures> all = net_three_nodes_slow_sender(-1, 0);
  all[2].compute_seconds = 0.5;
  const NetworkJudgement j = judge_network(all, 3, 3);
  ASSERT_EQ(j.faulty(), std::vector<int>{2});
  EXPECT_EQ(j.nodes[2].verdict, NetworkVerdict::kSlowCompute);
}

TEST(NetworkCheckTest, AHighLatencyIsFaultyOnlyAboveTheFloor) {
  std::vector<NodeMeasures> all = net_three_nodes_slow_sender(-1, 0);
  for (PeerMeasure& p : all[0].peers) p.latency_seconds = kLatencyFloor / 2;  // 10x, but tiny
  EXPECT_TRUE(judge_network(all, 3, 3).faulty().empty());
  for (PeerMeasure& p : all[0].peers) p.latency_seconds = 0.02;
  const NetworkJudgement j = judge_network(all, 3, 3);
  ASSERT_EQ(j.faulty(), std::vector<int>{0});
  EXPECT_EQ(j.nodes[0].verdict, NetworkVerdict::kSlowLink);
}

TEST(NetworkCheckTest, ANodeThatReachedNobodyIsUnreachableAndOneWithoutMeasuresIsNamed) {
  std::vector<NodeMeasures> all = net_three_nodes_slow_sender(-1, 0);
  all[1] = net_node_measures(1, {0, 0, 0});
  EXPECT_EQ(judge_network(all, 3, 3).nodes[1].verdict, NetworkVerdict::kUnreachable);
  all.erase(all.begin() + 1);
  const NetworkJudgement j = judge_network(all, 3, 3);
  EXPECT_EQ(j.faulty(), std::vector<int>{1});
  EXPECT_EQ(j.nodes[1].verdict, NetworkVerdict::kNoMeasures);
}

TEST(NetworkCheckTest, TwoNodesAreNotJudgedAndTheTableSaysSo) {
  std::vector<NodeMeasures> all = {net_node_measures(0, {0, kNetFast}),
                                   net_node_measures(1, {1e3, 0})};
  const NetworkJudgement j = judge_network(all, 2, 3);
  EXPECT_FALSE(j.judged);
  EXPECT_TRUE(j.faulty().empty());
  const std::vector<std::string> table = network_table(j);
  ASSERT_EQ(table.size(), 4u);
  EXPECT_NE(table.back().find("no node can be told apart"), std::string::npos);
}

TEST(NetworkCheckTest, TheTableHasOneRowPerNodeWithItsHostAndVerdict) {
  const std::vector<std::string> table =
      network_table(judge_network(net_three_nodes_slow_sender(2, kNetFast / 10), 3, 3));
  ASSERT_EQ(table.size(), 4u);
  EXPECT_EQ(table[0].rfind("node", 0), 0u);
  EXPECT_NE(table[1].find("host-0"), std::string::npos);
  EXPECT_NE(table[1].find("1.00 GB/s"), std::string::npos) << table[1];
  EXPECT_NE(table[1].find(" ok"), std::string::npos);
  EXPECT_NE(table[3].find("slow link: its best link carries 100.0 MB/s"), std::string::npos)
      << table[3];
}

TEST(NetworkCheckTest, AnElasticJobWithRoomLeavesTheFaultyNodeOut) {
  const NetworkJudgement j = judge_network(net_three_nodes_slow_sender(1, kNetFast / 10), 3, 3);
  const NetworkDecision d = decide_network(j, 2, true);
  EXPECT_FALSE(d.job_ends);
  EXPECT_EQ(d.left_out, std::vector<int>{1});
  EXPECT_EQ(d.why.rfind("--network_check: node 1 (host-1): its best link carries", 0), 0u) << d.why;
}

TEST(NetworkCheckTest, TheJobEndsWithoutRoomInAStaticJobOrForTheRendezvousHost) {
  std::vector<NodeMeasures> all = net_three_nodes_slow_sender(1, kNetFast / 10);
  const NetworkDecision no_room = decide_network(judge_network(all, 3, 3), 3, true);
  EXPECT_TRUE(no_room.job_ends);
  EXPECT_NE(no_room.why.find("; the job cannot go on without it: 2 node(s) would be left, under "
                             "--nnodes MIN (3)"),
            std::string::npos)
      << no_room.why;
  const NetworkDecision static_job = decide_network(judge_network(all, 3, 3), 2, false);
  EXPECT_TRUE(static_job.job_ends);
  EXPECT_NE(static_job.why.find("a static job needs every node"), std::string::npos);
  all[1].serves_rendezvous = true;
  const NetworkDecision d = decide_network(judge_network(all, 3, 3), 1, true);
  EXPECT_TRUE(d.job_ends);
  EXPECT_TRUE(d.left_out.empty());
  EXPECT_NE(d.why.find("node 1 serves the rendezvous store"), std::string::npos);
}

TEST(NetworkCheckTest, MeasuresReadBackAsWrittenAndNothingElseDoes) {
  const NodeMeasures m = net_node_measures(2, {kNetFast, 1234.5, 0}, 0.25);
  const std::optional<NodeMeasures> back = decode_node_measures(encode_node_measures(m));
  ASSERT_TRUE(back);
  EXPECT_EQ(encode_node_measures(*back), encode_node_measures(m));
  EXPECT_FALSE(decode_node_measures("{}"));
  EXPECT_FALSE(decode_node_measures("not json"));
}

}  // namespace
}  // namespace acc::launcher
