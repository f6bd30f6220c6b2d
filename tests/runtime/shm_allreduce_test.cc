// The gradient all-reduce through shared memory (runtime/src/shm_allreduce.h), its ranks as
// threads of this process, each with its own mapping of the segment, over an in-process store.
// The ranks as processes under acc-launch: distributed_test.cc's DataParallelTest, where every
// rank runs on this machine.

#include "shm_allreduce.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "acc/common/error.h"

namespace acc::runtime::detail {
namespace {

using std::chrono::milliseconds;

// Opens the segment on `world` ranks at once (open() blocks until all have it) and returns them.
std::vector<std::unique_ptr<ShmAllreduce>> open_ranks(c10d::Store& store, int world,
                                                      milliseconds timeout) {
  std::vector<std::unique_ptr<ShmAllreduce>> ranks(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back(
        [&, r] { ranks[r] = ShmAllreduce::open(store, "shm", r, world, timeout); });
  for (auto& t : threads) t.join();
  return ranks;
}

// Each rank's buffer: its own values, so that a missing or doubled share changes the mean.
at::Tensor buffer_of(int rank, int64_t size, at::ScalarType type) {
  return (torch::arange(size, torch::kDouble).remainder(977) * (rank + 1) + rank).to(type);
}

void expect_means(int world, int64_t size, at::ScalarType type) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto ranks = open_ranks(*store, world, milliseconds(60000));
  std::vector<at::Tensor> buffers;
  for (int r = 0; r < world; ++r) {
    ASSERT_NE(ranks[r], nullptr) << "rank " << r;
    buffers.push_back(buffer_of(r, size, type));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      for (int call = 0; call < 2; ++call) ranks[r]->average(buffers[r]);  // twice: reused
      ranks[r]->average(buffers[r]);
    });
  for (auto& t : threads) t.join();

  // Three averages of equal buffers leave the first mean; every rank holds the same bits.
  at::Tensor expected = torch::zeros({size}, torch::kDouble);
  for (int r = 0; r < world; ++r) expected += buffer_of(r, size, torch::kDouble);
  expected /= world;
  const double tolerance = type == torch::kBFloat16 ? 0.02 : 1e-5;
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(torch::equal(buffers[r], buffers[0])) << "rank " << r << " differs from rank 0";
    EXPECT_TRUE(torch::allclose(buffers[r].to(torch::kDouble), expected, tolerance, tolerance))
        << "rank " << r << ": largest difference "
        << (buffers[r].to(torch::kDouble) - expected).abs().max().item<double>();
  }
}

TEST(ShmAllreduceTest, ThreeRanksGetTheMeanOfABucketLargerThanTheirSlots) {
  expect_means(3, 2'500'000, torch::kFloat);  // 10 MB: three pieces of at most 4 MiB
}

TEST(ShmAllreduceTest, TwoRanksAverageBf16AndSmallBuckets) {
  expect_means(2, 4097, torch::kBFloat16);
  expect_means(2, 1, torch::kFloat);  // fewer elements than ranks: rank 1 sums none
}

TEST(ShmAllreduceTest, NothingIsLeftInDevShmOnceEveryRankHasTheSegment) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto ranks = open_ranks(*store, 2, milliseconds(60000));
  ASSERT_NE(ranks[0], nullptr);
  const std::string mine = "acc-ddp-" + std::to_string(::getpid()) + "-";
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
    EXPECT_NE(entry.path().filename().string().rfind(mine, 0), 0u) << entry.path();
}

TEST(ShmAllreduceTest, ARankThatNeverComesIsAnErrorAfterTheTimeout) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto ranks = open_ranks(*store, 2, milliseconds(300));
  ASSERT_NE(ranks[0], nullptr);
  at::Tensor buffer = torch::ones({16});
  try {
    ranks[0]->average(buffer);
    FAIL() << "average returned without rank 1";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 waited 300 ms for the other ranks in the "
                                         "gradient all-reduce (shared memory)"),
              std::string::npos)
        << e.what();
  }
}

TEST(ShmAllreduceTest, AppliesToSeveralCpuRanksOnOneMachineUnlessTurnedOff) {
  EXPECT_TRUE(ShmAllreduce::applies(2, 2, true));
  EXPECT_FALSE(ShmAllreduce::applies(1, 1, true));   // nothing to reduce
  EXPECT_FALSE(ShmAllreduce::applies(4, 2, true));   // ranks on other machines
  EXPECT_FALSE(ShmAllreduce::applies(2, 2, false));  // CUDA: NCCL's
  ::setenv("ACC_SHM_ALLREDUCE", "0", 1);
  EXPECT_FALSE(ShmAllreduce::applies(2, 2, true));
  ::unsetenv("ACC_SHM_ALLREDUCE");
}

}  // namespace
}  // namespace acc::runtime::detail
