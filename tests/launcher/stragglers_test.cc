#include "observe/stragglers.h"

#include <gtest/gtest.h>

#include "acc/common/progress_file.h"
#include "launcher_harness.h"
#include "observe/straggler_watch.h"

namespace acc::launcher {
namespace {

RankTiming timing(int rank, std::uint64_t steps, double window, double in_collective) {
  RankTiming t;
  t.rank = rank;
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
            "rank 3 is a straggler: 0.80 s of compute per step against a median of 0.10 s; the "
            "other ranks wait 0.80 s per step for it (window 5 s, 6 steps)");
}

TEST(StragglersTest, RanksThatStepAlikeHaveNoStraggler) {
  const StragglerFinding finding = find_stragglers(
      {timing(0, 10, 5, 1.0), timing(1, 10, 5, 1.1), timing(2, 10, 5, 0.9), timing(3, 10, 5, 1.2)});
  EXPECT_TRUE(finding.ranks.empty());
  EXPECT_EQ(describe_stragglers(finding, 5), "");
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

}  // namespace
}  // namespace acc::launcher
