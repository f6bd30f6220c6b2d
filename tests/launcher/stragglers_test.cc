#include "hangs/stragglers.h"

#include <gtest/gtest.h>

#include "acc/common/progress_file.h"
#include "hangs/straggler_watch.h"
#include "json_fields.h"
#include "launcher_harness.h"

namespace acc::launcher {
namespace {

RankTiming timing(int rank, std::uint64_t steps, double window, double in_collective,
                  int node = 0) {
  RankTiming t;
  t.rank = rank;
  t.node = node;
  t.steps = steps;
  t.window = window;
  t.in_collective = in_collective;
  return t;
}

// Rank 3 computes 0.8 s per step; the others compute 0.1 s and wait 0.8 s for it.
std::vector<RankTiming> one_slow_rank() {
  return {timing(0, 6, 5.4, 4.8), timing(1, 6, 5.4, 4.8), timing(2, 6, 5.4, 4.8),
          timing(3, 6, 5.4, 0.6)};
}

TEST(StragglersTest, TheRankWithMostTimeOutsideCollectivesIsTheStraggler) {
  const StragglerFinding finding = find_stragglers(one_slow_rank());
  EXPECT_EQ(finding.ranks, std::vector<int>{3});
  EXPECT_NEAR(finding.median_compute, 0.1, 1e-9);
  EXPECT_EQ(describe_stragglers(finding, 5),
            std::vector<std::string>{
                "rank 3 is a straggler: 0.80 s of compute per step against a median of 0.10 s; "
                "the other ranks wait 0.80 s per step for it (window 5 s, 6 steps)"});
}

TEST(StragglersTest, RanksThatStepAlikeHaveNoStraggler) {
  const StragglerFinding finding = find_stragglers(
      {timing(0, 10, 5, 1.0), timing(1, 10, 5, 1.1), timing(2, 10, 5, 0.9), timing(3, 10, 5, 1.2)});
  EXPECT_TRUE(finding.ranks.empty());
  EXPECT_TRUE(describe_stragglers(finding, 5).empty());
}

// Microseconds of difference name no one, however large the ratio.
TEST(StragglersTest, NoiseBelowTheAbsoluteFloorNamesNoOne) {
  const StragglerFinding finding = find_stragglers(
      {timing(0, 1000, 1, 0.999), timing(1, 1000, 1, 0.999), timing(2, 1000, 1, 0.996)});
  EXPECT_TRUE(finding.ranks.empty());
}

TEST(StragglersTest, RanksWithoutCompletedCollectivesAreLeftOut) {
  const StragglerFinding finding = find_stragglers({timing(0, 0, 5, 0), timing(1, 4, 5, 1)});
  EXPECT_TRUE(finding.ranks.empty());
  ASSERT_EQ(finding.timings.size(), 1u);
  EXPECT_EQ(finding.timings[0].rank, 1);
}

TEST(StragglersTest, TheTableMarksTheStraggler) {
  const std::string table = format_straggler_table(find_stragglers(one_slow_rank()));
  EXPECT_NE(table.find("  rank  steps   compute s/step  wait s/step\n"), std::string::npos);
  EXPECT_NE(table.find("  0     6       0.100           0.800\n"), std::string::npos) << table;
  EXPECT_NE(table.find("  3     6       0.800           0.100        <- straggler\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(format_straggler_table(find_stragglers({})), "");
}

// --- across nodes ---------------------------------------------------------------------------

// Two nodes of two ranks; node 1's ranks compute 0.35 s per step, node 0's 0.05 s and wait 0.30 s.
std::vector<RankTiming> one_slow_node() {
  return {timing(0, 10, 4.0, 3.5, 0), timing(1, 10, 4.0, 3.5, 0), timing(2, 10, 4.0, 0.5, 1),
          timing(3, 10, 4.0, 0.5, 1)};
}

TEST(StragglersTest, ANodeWhoseRanksAreAllSlowIsNamedOnceAsANode) {
  const StragglerFinding finding = find_stragglers(one_slow_node());
  EXPECT_EQ(finding.nodes, std::vector<int>{1});
  EXPECT_TRUE(finding.ranks.empty()) << "its ranks are named through their node";
  EXPECT_EQ(describe_stragglers(finding, 5, {{0, "head"}, {1, "gpu-b"}}),
            std::vector<std::string>{
                "node 1 (gpu-b) is a straggler: its ranks compute at least 0.35 s per step "
                "against 0.05 s on the other nodes; the other nodes' ranks wait 0.35 s per step "
                "for it (window 5 s, 10 steps)"});
  const std::string table = format_straggler_table(finding);
  EXPECT_NE(table.find("  rank  node  steps   compute s/step  wait s/step\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("  0     0     10      0.050           0.350\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("  3     1     10      0.350           0.050        <- straggler\n"),
            std::string::npos)
      << table;
}

TEST(StragglersTest, OneSlowRankOnAnotherNodeIsARankNotANode) {
  const StragglerFinding finding =
      find_stragglers({timing(0, 6, 5.4, 4.8, 0), timing(1, 6, 5.4, 4.8, 0),
                       timing(2, 6, 5.4, 4.8, 1), timing(3, 6, 5.4, 0.6, 1)});
  EXPECT_TRUE(finding.nodes.empty());
  EXPECT_EQ(finding.ranks, std::vector<int>{3});
}

TEST(StragglersTest, OneRankPerNodeNamesTheSlowNode) {
  const StragglerFinding finding = find_stragglers(
      {timing(0, 10, 4.0, 3.5, 0), timing(1, 10, 4.0, 0.5, 1), timing(2, 10, 4.0, 3.5, 2)});
  EXPECT_EQ(finding.nodes, std::vector<int>{1});
  EXPECT_TRUE(finding.ranks.empty());
  EXPECT_EQ(describe_stragglers(finding, 5).size(), 1u);
}

TEST(StragglersTest, NodeTimingsSurviveTheStoreAndGarbageIsRefused) {
  NodeTimings timings;
  timings.node = 3;
  timings.host = "gpu-d";
  timings.sequence = 17;
  timings.window = {timing(6, 12, 5.001, 0.25, 3)};
  timings.totals = {timing(6, 40, 20.5, 1.125, 3), timing(7, 41, 20.5, 1.5, 3)};
  const std::optional<NodeTimings> back = decode_node_timings(encode_node_timings(timings));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->node, 3);
  EXPECT_EQ(back->host, "gpu-d");
  EXPECT_EQ(back->sequence, 17u);
  ASSERT_EQ(back->window.size(), 1u);
  EXPECT_EQ(back->window[0].rank, 6);
  EXPECT_EQ(back->window[0].node, 3);
  EXPECT_EQ(back->window[0].steps, 12u);
  EXPECT_EQ(back->window[0].window, 5.001);  // exactly: doubles are written to round trip
  EXPECT_EQ(back->window[0].in_collective, 0.25);
  ASSERT_EQ(back->totals.size(), 2u);
  EXPECT_EQ(back->totals[1].rank, 7);
  EXPECT_EQ(back->totals[1].node, 3);
  EXPECT_EQ(back->totals[1].steps, 41u);
  EXPECT_FALSE(decode_node_timings(""));
  EXPECT_FALSE(decode_node_timings("acc-stragglers 1\nnode 1 host h sequence 1\n"));
}

NodeTimings node_window(int node, std::uint64_t sequence, std::vector<RankTiming> window) {
  NodeTimings timings;
  timings.node = node;
  timings.host = "host-" + std::to_string(node);
  timings.sequence = sequence;
  timings.totals = window;
  timings.window = std::move(window);
  return timings;
}

TEST(StragglersTest, NodeTimingsOfAnotherVersionOrWithABadFieldAreRefusedNotReadAsZero) {
  const std::string text = encode_node_timings(node_window(1, 4, {timing(2, 12, 5.0, 0.25, 1)}));
  ASSERT_TRUE(decode_node_timings(text));
  EXPECT_FALSE(decode_node_timings(with_field(text, "/version", 1)));
  EXPECT_FALSE(decode_node_timings(with_field(text, "/version", 3)));
  EXPECT_FALSE(decode_node_timings(with_field(text, "/node", "1")));
  EXPECT_FALSE(decode_node_timings(with_field(text, "/sequence", -1)));
  EXPECT_FALSE(decode_node_timings(with_field(text, "/window/0/steps", "12")));
  EXPECT_FALSE(decode_node_timings(with_field(text, "/window/0/steps", 12.5)));
  EXPECT_FALSE(decode_node_timings(with_field(text, "/window/0/rank", true)));
  EXPECT_FALSE(decode_node_timings(with_field(text, "/window/0/window", "5.0")));
  EXPECT_FALSE(decode_node_timings(with_field(text, "/window/0/in_collective", nullptr)));
  EXPECT_FALSE(decode_node_timings(with_field(text, "/totals", nlohmann::json::object())));
  EXPECT_FALSE(decode_node_timings(without_field(text, "/window/0/steps")));
  EXPECT_FALSE(decode_node_timings(text.substr(0, text.size() / 2)));
}

// Node 0 of three (with no rank of its own here): the others' windows come through the exchange;
// a node is named once, and a window that did not change for two of node 0's ticks is left out.
TEST(StragglerWatchTest, NodeZeroNamesASlowNodeFromTheOthersWindowsWhileTheyAreFresh) {
  std::uint64_t sequence = 1;
  std::vector<NodeTimings> published_by_node_zero;
  const auto start = StragglerWatch::Clock::now();
  StragglerWatch watch(
      {}, std::chrono::milliseconds(1000), start, 0, "host-0", [&](const NodeTimings& mine) {
        published_by_node_zero.push_back(mine);
        return std::optional(
            std::vector<NodeTimings>{node_window(1, sequence, {timing(0, 10, 4.0, 3.5, 1)}),
                                     node_window(2, sequence, {timing(1, 10, 4.0, 0.5, 2)}),
                                     node_window(3, sequence, {timing(2, 10, 4.0, 3.5, 3)})});
      });
  auto at = start + std::chrono::milliseconds(1000);
  EXPECT_EQ(watch.tick(at),
            std::vector<std::string>{
                "node 2 (host-2) is a straggler: its ranks compute at least 0.35 s per step "
                "against 0.05 s on the other nodes; the other nodes' ranks wait 0.35 s per step "
                "for it (window 1 s, 10 steps)"});
  EXPECT_TRUE(watch.named_any());
  EXPECT_TRUE(watch.job_wide());
  ASSERT_EQ(published_by_node_zero.size(), 1u);
  EXPECT_EQ(published_by_node_zero[0].sequence, 1u);
  at += std::chrono::milliseconds(1000);
  EXPECT_TRUE(watch.tick(at).empty()) << "named already; the windows are one tick old";
  at += std::chrono::milliseconds(1000);
  EXPECT_TRUE(watch.tick(at).empty()) << "stale windows name no one";
  sequence = 2;
  at += std::chrono::milliseconds(1000);
  EXPECT_EQ(watch.tick(at).size(), 1u) << "fresh windows again";
  EXPECT_EQ(watch.whole_run().nodes, std::vector<int>{2});
}

TEST(StragglerWatchTest, AnotherNodePublishesItsWindowAndSaysNothing) {
  int published = 0;
  const auto start = StragglerWatch::Clock::now();
  StragglerWatch watch({}, std::chrono::milliseconds(1000), start, 1, "host-1",
                       [&](const NodeTimings& mine) -> std::optional<std::vector<NodeTimings>> {
                         EXPECT_EQ(mine.node, 1);
                         EXPECT_EQ(mine.host, "host-1");
                         ++published;
                         return std::nullopt;
                       });
  EXPECT_TRUE(watch.tick(start + std::chrono::milliseconds(1000)).empty());
  EXPECT_TRUE(watch.tick(start + std::chrono::milliseconds(2000)).empty());
  EXPECT_EQ(published, 2);
  EXPECT_FALSE(watch.named_any());
}

}  // namespace
}  // namespace acc::launcher
