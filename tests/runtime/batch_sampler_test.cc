#include "acc/runtime/batch_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "acc/common/error.h"

namespace {

// The ranks' batches interleaved in round order: what one process would have read.
std::vector<size_t> interleave(const std::vector<size_t>& order, acc::ShardSpec spec) {
  std::vector<std::vector<std::vector<size_t>>> per_rank;
  for (int r = 0; r < spec.world_size; ++r) {
    spec.rank = r;
    per_rank.push_back(acc::shard_batches(order, spec));
  }
  std::vector<size_t> all;
  for (size_t b = 0; b < per_rank[0].size(); ++b)
    for (const auto& rank : per_rank) {
      EXPECT_LT(b, rank.size()) << "ranks differ in their number of batches";
      if (b < rank.size()) all.insert(all.end(), rank[b].begin(), rank[b].end());
    }
  return all;
}

TEST(BatchSamplerTest, EvenBatchesReadTheOrderOnceThenPadFromItsStart) {
  for (size_t n : {1u, 7u, 8u, 37u, 50u, 64u, 65u}) {
    for (int world : {1, 2, 3, 4}) {
      for (size_t bs : {1u, 4u, 5u}) {
        const auto order = acc::epoch_order(n, true, 3, 1);
        acc::ShardSpec spec{bs, 0, world, false, true};
        const auto all = interleave(order, spec);
        ASSERT_GE(all.size(), n);
        EXPECT_EQ(all.size() % (bs * static_cast<size_t>(world)), 0u);
        EXPECT_TRUE(std::equal(order.begin(), order.end(), all.begin()));
        for (size_t i = n; i < all.size(); ++i) EXPECT_EQ(all[i], order[(i - n) % n]);
        const size_t remainder = acc::last_round_remainder(n, spec);
        EXPECT_EQ(remainder, n % (bs * static_cast<size_t>(world)));
      }
    }
  }
}

TEST(BatchSamplerTest, DropLastReadsOnlyCompleteRounds) {
  const auto order = acc::epoch_order(37, false, 0, 0);
  acc::ShardSpec spec{4, 0, 2, true, true};
  const auto all = interleave(order, spec);
  EXPECT_EQ(all.size(), 32u);
  EXPECT_TRUE(std::equal(all.begin(), all.end(), order.begin()));
  EXPECT_EQ(acc::last_round_remainder(37, spec), 0u);
}

TEST(BatchSamplerTest, WithoutEvenBatchesTheLastRankMayReadFewerSamples) {
  const auto order = acc::epoch_order(10, false, 0, 0);
  acc::ShardSpec spec{4, 0, 2, false, false};
  EXPECT_EQ(acc::shard_batches(order, spec).size(), 2u);  // [0..3], [8, 9]
  spec.rank = 1;
  const auto rank1 = acc::shard_batches(order, spec);
  ASSERT_EQ(rank1.size(), 1u);
  EXPECT_EQ(rank1[0], (std::vector<size_t>{4, 5, 6, 7}));
}

TEST(BatchSamplerTest, TheShuffleIsAPermutationThatChangesWithTheEpochOnly) {
  const auto a = acc::epoch_order(1000, true, 42, 0);
  EXPECT_EQ(a, acc::epoch_order(1000, true, 42, 0));
  EXPECT_NE(a, acc::epoch_order(1000, true, 42, 1));
  EXPECT_EQ(std::set<size_t>(a.begin(), a.end()).size(), 1000u);
  EXPECT_EQ(acc::epoch_order(3, false, 42, 5), (std::vector<size_t>{0, 1, 2}));
}

TEST(BatchSamplerTest, ABadSpecIsAConfigError) {
  EXPECT_THROW(acc::shard_batches({0, 1}, acc::ShardSpec{0, 0, 1, false, true}), acc::ConfigError);
  EXPECT_THROW(acc::shard_batches({0, 1}, acc::ShardSpec{1, 2, 2, false, true}), acc::ConfigError);
}

}  // namespace
