// acc::DataLoader over LibTorch's own datasets (torch::data::datasets::Dataset): the same
// batches, and the same shards per rank, as over an acc::TensorDataset of the same samples.
// A loader is sharded here as Accelerator::prepare shards it (DataLoader::shard), one rank at a
// time, so these tests need no process group.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "acc/common/error.h"
#include "acc/runtime/data_loader.h"

namespace {

// Sample i: data [i, 2i, 3i], target i. A batch names the samples it holds.
class Counting : public torch::data::datasets::Dataset<Counting> {
 public:
  explicit Counting(size_t size) : size_(size) {}
  torch::data::Example<> get(size_t index) override {
    const auto i = static_cast<float>(index);
    return {torch::tensor({i, 2 * i, 3 * i}), torch::tensor(static_cast<int64_t>(index))};
  }
  torch::optional<size_t> size() const override { return size_; }

 private:
  size_t size_;
};

// The same samples as rows of tensors.
acc::TensorDataset counting_tensors(int64_t size) {
  auto ids = torch::arange(size);
  auto data = torch::stack({ids, 2 * ids, 3 * ids}, 1).to(torch::kFloat);
  return {data, ids};
}

// A user's collate: the batch's samples into one Example<>, targets as a column.
torch::data::transforms::Collate<torch::data::Example<>> as_column() {
  return torch::data::transforms::Collate<torch::data::Example<>>(
      [](std::vector<torch::data::Example<>> examples) {
        std::vector<torch::Tensor> data, targets;
        for (auto& e : examples) {
          data.push_back(e.data);
          targets.push_back(e.target.reshape({1}));
        }
        return torch::data::Example<>{torch::stack(data), torch::stack(targets)};
      });
}

// Every batch of one pass.
std::vector<acc::Batch> read_all(acc::DataLoader& loader) {
  std::vector<acc::Batch> batches;
  for (const auto& batch : loader) batches.push_back(batch);
  return batches;
}

acc::DataLoader sharded(acc::DataLoader loader, int rank, int world) {
  loader.shard(rank, world, /*even_batches=*/true, torch::kCPU, nullptr);
  return loader;
}

struct Case {
  int world;
  bool shuffle;
};

// gtest names the parameter in its listing (without this, the struct's bytes, padding included).
void PrintTo(const Case& c, std::ostream* out) {
  *out << c.world << " ranks, " << (c.shuffle ? "shuffled" : "in order");
}

class TorchDatasetTest : public ::testing::TestWithParam<Case> {};

// 37 samples do not fill the last round of 4 x world; two epochs, so a shuffle is reseeded.
TEST_P(TorchDatasetTest, EachRankReadsTheBatchesATensorDatasetGivesIt) {
  const auto [world, shuffle] = GetParam();
  const acc::DataLoaderOptions options{/*batch_size=*/4, shuffle, /*drop_last=*/false,
                                       /*seed=*/9};
  for (int rank = 0; rank < world; ++rank) {
    auto expected = sharded(acc::DataLoader(counting_tensors(37), options), rank, world);
    auto per_sample = sharded(acc::DataLoader(Counting(37), options), rank, world);
    auto stacked =
        sharded(acc::DataLoader(Counting(37).map(torch::data::transforms::Stack<>()), options),
                rank, world);
    auto collated = sharded(acc::DataLoader(Counting(37).map(as_column()), options), rank, world);
    auto tensors_only = sharded(
        acc::DataLoader(torch::data::datasets::TensorDataset(counting_tensors(37).data()), options),
        rank, world);
    EXPECT_EQ(per_sample.size(), expected.size());
    EXPECT_EQ(per_sample.dataset_size(), 37u);
    for (int epoch = 0; epoch < 2; ++epoch) {
      const auto want = read_all(expected);
      ASSERT_FALSE(want.empty());
      const auto got = read_all(per_sample);
      const auto got_stacked = read_all(stacked);
      const auto got_collated = read_all(collated);
      const auto got_tensors = read_all(tensors_only);
      ASSERT_EQ(got.size(), want.size());
      ASSERT_EQ(got_stacked.size(), want.size());
      ASSERT_EQ(got_collated.size(), want.size());
      ASSERT_EQ(got_tensors.size(), want.size());
      for (size_t b = 0; b < want.size(); ++b) {
        const std::string where = "rank " + std::to_string(rank) + " epoch " +
                                  std::to_string(epoch) + " batch " + std::to_string(b);
        EXPECT_TRUE(got[b].data.equal(want[b].data)) << where;
        EXPECT_TRUE(got[b].target.equal(want[b].target)) << where;
        EXPECT_TRUE(got_stacked[b].data.equal(want[b].data)) << where;
        EXPECT_TRUE(got_stacked[b].target.equal(want[b].target)) << where;
        EXPECT_TRUE(got_collated[b].data.equal(want[b].data)) << where;
        EXPECT_TRUE(got_collated[b].target.equal(want[b].target.reshape({-1, 1}))) << where;
        EXPECT_TRUE(got_tensors[b].data.equal(want[b].data)) << where;
        EXPECT_FALSE(got_tensors[b].target.defined()) << where;
      }
    }
    EXPECT_EQ(per_sample.epoch(), 2u);
  }
}

// Accelerate's even_batches: every rank reads the same number of full batches; the shards cover
// the dataset and overlap only in the samples that complete the last round, which come from the
// start of the epoch's order. A size that fills whole rounds gives disjoint shards.
TEST_P(TorchDatasetTest, ShardsCoverTheDatasetAndRepeatOnlyTheSamplesThatCompleteTheLastRound) {
  const auto [world, shuffle] = GetParam();
  const size_t round = 4 * static_cast<size_t>(world);  // samples a round of batches reads
  for (size_t size : {size_t{37}, round * 5}) {
    const acc::DataLoaderOptions options{4, shuffle, false, /*seed=*/3};
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      std::map<int64_t, int> reads;
      std::vector<int64_t> first_batch;  // rank 0's first
      size_t total = 0;
      for (int rank = 0; rank < world; ++rank) {
        auto loader = sharded(acc::DataLoader(Counting(size), options), rank, world);
        loader.set_epoch(epoch);
        const auto batches = read_all(loader);
        EXPECT_EQ(batches.size(), (size + round - 1) / round) << "rank " << rank;
        for (const auto& batch : batches) {
          EXPECT_EQ(batch.target.size(0), 4);
          for (int64_t i = 0; i < batch.target.size(0); ++i) {
            const int64_t id = batch.target[i].item<int64_t>();
            ++reads[id];
            if (rank == 0 && &batch == &batches.front()) first_batch.push_back(id);
            EXPECT_TRUE(batch.data[i].equal(torch::tensor({1.0f, 2.0f, 3.0f}) * id));
          }
          total += static_cast<size_t>(batch.target.size(0));
        }
      }
      EXPECT_EQ(reads.size(), size) << "every sample is read";
      const auto order = acc::epoch_order(size, shuffle, 3, epoch);
      EXPECT_EQ(first_batch, std::vector<int64_t>(order.begin(), order.begin() + 4));
      const size_t padding = total - size;
      EXPECT_EQ(padding, (round - size % round) % round);
      std::set<int64_t> repeated, first;
      for (const auto& [id, n] : reads)
        if (n > 1) repeated.insert(id);
      for (size_t i = 0; i < padding; ++i) first.insert(static_cast<int64_t>(order[i]));
      EXPECT_EQ(repeated, first) << "the padding repeats the first samples of the order";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, TorchDatasetTest,
                         ::testing::Values(Case{2, false}, Case{2, true}, Case{3, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::to_string(info.param.world) + "Ranks" +
                                  (info.param.shuffle ? "Shuffled" : "InOrder");
                         });

// gather_for_metrics reads the loader's state: the last batch and how many rows of the last
// round are real, as for a TensorDataset.
TEST(TorchDatasetLoaderTest, MarksTheEndOfTheLoaderAndTheRemainderOfTheLastRound) {
  auto state = std::make_shared<acc::GradientState>();
  acc::DataLoader loader(Counting(37), {4, false, false, 0});
  loader.shard(1, 2, true, torch::kCPU, state);
  size_t batches = 0;
  for (auto it = loader.begin(); it != loader.end(); ++it) {
    ++batches;
    EXPECT_EQ(state->end_of_dataloader, batches == loader.size());
    EXPECT_EQ(state->remainder, 37u % 8u);
  }
  EXPECT_EQ(batches, 5u);
}

// docs/runtime.md's example, as written there.
class Pairs : public torch::data::datasets::Dataset<Pairs> {
 public:
  Pairs(torch::Tensor images, torch::Tensor labels) : images_(images), labels_(labels) {}
  torch::data::Example<> get(size_t i) override { return {images_[i], labels_[i]}; }
  torch::optional<size_t> size() const override { return images_.size(0); }

 private:
  torch::Tensor images_, labels_;
};

TEST(TorchDatasetLoaderTest, TheDocumentedExampleYieldsStackedBatches) {
  auto x = torch::rand({12, 1, 4, 4});
  auto y = torch::arange(12);
  acc::DataLoader loader(Pairs(x, y).map(torch::data::transforms::Stack<>()),
                         {/*batch_size=*/4, /*shuffle=*/true});
  int64_t samples = 0;
  for (const auto& batch : loader) {
    EXPECT_EQ(batch.data.sizes().slice(1), x.sizes().slice(1));
    EXPECT_TRUE(batch.data.equal(x.index_select(0, batch.target)));
    samples += batch.target.size(0);
  }
  EXPECT_EQ(samples, 12);
}

class Unsized : public torch::data::datasets::Dataset<Unsized> {
 public:
  torch::data::Example<> get(size_t) override { return {torch::zeros({1}), torch::zeros({})}; }
  torch::optional<size_t> size() const override { return {}; }
};

TEST(TorchDatasetLoaderTest, ADatasetWithoutASizeIsAConfigErrorNamingSize) {
  try {
    acc::DataLoader loader(Unsized(), {4});
    FAIL() << "an unsized dataset was accepted";
  } catch (const acc::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("size()"), std::string::npos) << e.what();
  }
}

TEST(TorchDatasetLoaderTest, DatasetSizeServesBothKindsAndDatasetIsOnlyATensorDatasets) {
  acc::DataLoader loader(Counting(5), {2});
  EXPECT_EQ(loader.dataset_size(), 5u);
  EXPECT_EQ(loader.size(), 3u);
  EXPECT_THROW(loader.dataset(), acc::ConfigError);
  acc::DataLoader tensors(counting_tensors(5), {2});
  EXPECT_EQ(tensors.dataset().size(), 5u);
  EXPECT_EQ(tensors.dataset_size(), 5u);
}

}  // namespace
