// libacc with real processes: acc-launch starts runtime_worker over Gloo on the loopback, and on
// a machine with GPUs over NCCL (the Cuda*Test ones, skipped without one).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "acc/common/progress_file.h"
#include "acc/common/torch_env.h"
#include "worker_run.h"

namespace {

using acc::testing::read_bytes;
using acc::testing::Result;
using acc::testing::run;
using acc::testing::TempDir;

// Every test but the Cuda*Test ones is a Gloo test: its processes stay on the CPU even where CUDA
// is available (their 2 or 3 ranks would otherwise share one GPU, which NCCL refuses).
[[maybe_unused]] const bool kGlooTests = setenv("ACCELERATE_USE_CPU", "1", 1) == 0;

std::string launch(int nproc, const std::string& args, const std::string& extra = "") {
  return acc::testing::launch_command(nproc, RUNTIME_WORKER_BIN, args, extra);
}

std::vector<float> read_floats(const std::filesystem::path& path) {
  const std::string bytes = read_bytes(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::copy(bytes.begin(),
            bytes.begin() + static_cast<std::ptrdiff_t>(values.size() * sizeof(float)),
            reinterpret_cast<char*>(values.data()));
  return values;
}

std::vector<long> read_ints(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<long> values;
  for (long v = 0; in >> v;) values.push_back(v);
  return values;
}

// After K steps every rank holds the same parameters, and they match one process trained on
// the concatenated batches (float tolerance: the sums are associated differently).
// `env` prefixes both commands (the CUDA test's lets the processes see the GPU); `data`
// "torchdata" reads a torch::data dataset in a shuffled order instead of a TensorDataset.
void expect_ddp_matches_one_process(int world, int steps, int accum, const std::string& env = "",
                                    const std::string& data = "") {
  TempDir dir;
  const std::string args =
      "ddp " + dir.path() + " " + std::to_string(steps) + " " + std::to_string(accum) + " " + data;
  auto ddp = run(env + launch(world, args));
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  auto ref = run(env + std::string(RUNTIME_WORKER_BIN) + " reference " + dir.path() + " " +
                 std::to_string(steps) + " " + std::to_string(world) + " " + std::to_string(accum) +
                 " " + data);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;

  const auto rank0 = read_bytes(dir.path() + "/params_rank0.bin");
  ASSERT_GT(rank0.size(), 1000u);
  for (int r = 1; r < world; ++r)
    EXPECT_EQ(read_bytes(dir.path() + "/params_rank" + std::to_string(r) + ".bin"), rank0)
        << "rank " << r << " differs from rank 0";
  const auto ddp_params = read_floats(dir.path() + "/params_rank0.bin");
  const auto ref_params = read_floats(dir.path() + "/params_reference.bin");
  ASSERT_EQ(ddp_params.size(), ref_params.size());
  float worst = 0;
  for (size_t i = 0; i < ddp_params.size(); ++i)
    worst = std::max(worst, std::abs(ddp_params[i] - ref_params[i]));
  EXPECT_LT(worst, 1e-5f) << "largest difference from the one-process run";
}

TEST(DataParallelTest, TwoRanksStayIdenticalAndMatchOneProcessOnTheConcatenatedBatches) {
  expect_ddp_matches_one_process(2, 6, 1);
}

TEST(DataParallelTest, ThreeRanksStayIdenticalAndMatchOneProcessOnTheConcatenatedBatches) {
  expect_ddp_matches_one_process(3, 6, 1);
}

// Every rank on this machine: the buckets go through shared memory (shm_allreduce.h), the tests
// above; turned off, through Gloo, as across machines.
TEST(DataParallelTest, ThroughGlooTooTheRanksStayIdenticalAndMatchOneProcess) {
  expect_ddp_matches_one_process(3, 6, 1, "ACC_SHM_ALLREDUCE=0 ");
}

TEST(DataParallelTest, AccumulatingTwoMicroBatchesMatchesOneProcessOnTheirConcatenation) {
  expect_ddp_matches_one_process(2, 3, 2);
}

// A user's torch::data::datasets::Dataset, shuffled: rank r reads batch r of each round of the
// epoch's order, so the two ranks' batches are the one process's batch of 8 (in that order).
TEST(DataParallelTest, ATorchDataDatasetOnTwoRanksMatchesOneProcessOnTheWholeBatch) {
  expect_ddp_matches_one_process(2, 6, 1, "", "torchdata");
}

TEST(CollectivesTest, EveryCollectiveGivesItsResultOnThreeRanks) {
  auto result = run(launch(3, "collectives"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(result.output.find("collectives ok rank " + std::to_string(r) + " of 3"),
              std::string::npos)
        << result.output;
}

// Under acc-launch the Accelerator records its collectives in each worker's progress file, the
// trace the launcher's hang report and straggler watch read: the same ops under the same sequence
// numbers on every rank, each completed.
TEST(CollectivesTest, EachRankRecordsItsCollectivesInItsProgressFile) {
  TempDir dir;
  auto result = run(launch(3, "collectives", "--log_dir " + dir.path()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::vector<acc::progress_file::Snapshot> ranks;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path()))
    if (entry.path().filename() == "progress")
      ranks.push_back(acc::progress_file::Reader(entry.path().string()).snapshot());
  ASSERT_EQ(ranks.size(), 3u);
  for (const acc::progress_file::Snapshot& rank : ranks) {
    EXPECT_NE(rank.writer_pid, 0);
    EXPECT_EQ(rank.started, rank.completed);
    ASSERT_EQ(rank.calls.size(), ranks[0].calls.size());
    std::set<std::string> ops;
    for (size_t i = 0; i < rank.calls.size(); ++i) {
      const acc::progress_file::Call& call = rank.calls[i];
      EXPECT_EQ(call.seq, i + 1);
      EXPECT_EQ(call.op, ranks[0].calls[i].op) << "seq " << call.seq;
      EXPECT_EQ(call.group, "default");
      EXPECT_EQ(call.group_size, 3);
      EXPECT_GE(call.end_ns, call.start_ns);
      ops.insert(call.op);
    }
    EXPECT_EQ(ops, (std::set<std::string>{"all_gather", "all_reduce", "broadcast", "barrier"}));
  }
}

// A C++ worker that dies of an uncaught exception: libacc's terminate handler writes
// TORCHELASTIC_ERROR_FILE as PyTorch's @record does, so the failure table shows the exception's
// type and text, not "<none written>".
TEST(ErrorFileTest, AnUncaughtExceptionIsInTheFailureReport) {
  auto result = run(launch(2, "throw"));
  EXPECT_EQ(result.exit_code, 128 + SIGABRT) << result.output;
  EXPECT_EQ(result.output.find("<none written>"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("error     : std::runtime_error: rank "), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find(" cannot open /data/shard-7.bin"), std::string::npos)
      << result.output;
}

// acc-launch cannot tell a C++ worker's LibTorch, so it sets both names of a renamed variable;
// libacc keeps, before its group exists, only the one its LibTorch reads.
TEST(TorchNamesTest, AWorkerKeepsOnlyTheNamesItsLibTorchReads) {
  auto result = run(launch(2, "nccl_env"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const acc::torch_env::Version mine{TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR};
  for (int rank = 0; rank < 2; ++rank) {
    const std::string prefix = "rank " + std::to_string(rank) + " ";
    for (const char* name : {"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"})
      EXPECT_NE(result.output.find(prefix + name +
                                   (acc::torch_env::reads(name, mine) ? "=1\n" : " unset\n")),
                std::string::npos)
          << name << "\n"
          << result.output;
    // Of the Flight Recorder's size, the name this LibTorch reads (2.2 and later) stays alone;
    // a LibTorch without it (1.13) leaves both, which it ignores.
    for (const char* name : {"TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE"}) {
      const bool any = acc::torch_env::reads("TORCH_NCCL_TRACE_BUFFER_SIZE", mine) ||
                       acc::torch_env::reads("TORCH_FR_BUFFER_SIZE", mine);
      const bool kept = !any || acc::torch_env::reads(name, mine);
      EXPECT_NE(result.output.find(prefix + name + (kept ? "=2000\n" : " unset\n")),
                std::string::npos)
          << name << "\n"
          << result.output;
    }
  }
}

// After prepare, a plain loss.backward() leaves each rank its own gradients: the first step
// refuses them, with a line naming acc.backward, rather than letting the ranks drift apart.
// (Every rank refuses it; the first to exit makes acc-launch stop the others, which may go
// before they print, so one line is what the test can count on.)
TEST(MisuseTest, APlainLossBackwardOnTwoRanksFailsWithALineNamingAccBackward) {
  auto result = run(launch(2, "plain_backward"));
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output.find("stepped"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("]: runtime_worker: optimizer step on gradients that "
                               "acc.backward(loss) did not compute"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("call acc.backward(loss) instead of loss.backward()"),
            std::string::npos)
      << result.output;
}

// Rank 0 makes one synchronised backward more than rank 1, which ends and leaves: Gloo says
// only "Connection reset by peer"; the error names the ranks' different counts of backward.
TEST(MisuseTest, RanksWithDifferentNumbersOfBackwardCallsAreNamedAsSuch) {
  auto result = run(launch(2, "uneven_backward"));
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("the ranks made different numbers of synchronised backward calls: "
                               "this rank (0) failed in call 4 and rank 1 left the group after 3"),
            std::string::npos)
      << result.output;
}

TEST(CollectivesTest, AWorldOfOneNeedsNoLauncher) {
  auto result = run(std::string("env -u RANK -u WORLD_SIZE -u LOCAL_RANK ") + RUNTIME_WORKER_BIN +
                    " collectives");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("collectives ok rank 0 of 1"), std::string::npos) << result.output;
}

TEST(MixedPrecisionTest, Bf16AutocastsOnCpuAndFp16OnCpuIsAClearError) {
  auto result = run(std::string("env -u RANK -u WORLD_SIZE -u LOCAL_RANK ") + RUNTIME_WORKER_BIN +
                    " mixed_precision");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("mixed precision ok"), std::string::npos) << result.output;
}

// 37 samples, batch 4, 2 ranks: the last round is padded with 3 samples from the start.
TEST(GatherForMetricsTest, CountsEverySampleExactlyOnceWhenTheWorldDoesNotDivideTheDataset) {
  TempDir dir;
  auto result = run(launch(2, "metrics " + dir.path() + " 37"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  auto gathered = read_ints(dir.path() + "/gathered.txt");
  ASSERT_EQ(gathered.size(), 37u);
  std::sort(gathered.begin(), gathered.end());
  for (long i = 0; i < 37; ++i) EXPECT_EQ(gathered[static_cast<size_t>(i)], i);
}

TEST(GatherForMetricsTest, TheShardedSamplerReadsEverySampleOnceAndPadsOnlyTheLastRound) {
  TempDir dir;
  auto result = run(launch(3, "metrics " + dir.path() + " 50"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::map<long, int> count;
  size_t total = 0;
  for (int r = 0; r < 3; ++r) {
    auto seen = read_ints(dir.path() + "/train_rank" + std::to_string(r) + ".txt");
    EXPECT_EQ(seen.size(), 20u) << "rank " << r << " reads 5 batches of 4";
    for (long v : seen) ++count[v];
    total += seen.size();
  }
  EXPECT_EQ(count.size(), 50u) << "every sample is read";
  EXPECT_EQ(total - 50, 10u) << "only the 10 padding samples repeat";
}

// The worker dies in epoch 3 of its first attempt; acc-launch restarts the group, which loads
// the checkpoint of epoch 2 from the node's memory and must end bit for bit where an
// uninterrupted run ends. The launcher has written the last save to the checkpoint's directory:
// one process without acc-launch loads it and holds the same parameters.
// `env` prefixes the launches (the CUDA test's lets the processes see the GPU).
void expect_resume_matches_uninterrupted_run(int world, const std::string& env = "") {
  TempDir straight, resumed;
  const std::string n = std::to_string(world);
  auto a = run(env + launch(world, "resume " + straight.path() + " 4 0"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = run(env + "ACC_LOG_LEVEL=debug " +
               launch(world, "resume " + resumed.path() + " 4 1", "--max_restarts 1"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("crashing on purpose"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("loaded state (step 12) from /"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("/libacc.2\n"), std::string::npos)
      << "the restart loads epoch 2's save from memory\n"
      << b.output;
  // The last save, written by the launcher: whole, every rank's RNG states, nothing of its own.
  const std::string persisted = resumed.path() + "/ckpt";
  for (int r = 0; r < world; ++r)
    EXPECT_TRUE(std::filesystem::exists(persisted + "/random_states_" + std::to_string(r) + ".pt"));
  EXPECT_FALSE(std::filesystem::exists(persisted + "/saved-for"));
  EXPECT_FALSE(std::filesystem::exists(persisted + ".acc-writing"));
  TempDir alone;
  std::filesystem::copy(persisted, alone.path() + "/ckpt",
                        std::filesystem::copy_options::recursive);
  auto c = run(env + "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u ACC_CHECKPOINT_MEMORY " +
               RUNTIME_WORKER_BIN + " resume " + alone.path() + " 4 0");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(read_bytes(alone.path() + "/params_rank0.bin"),
            read_bytes(straight.path() + "/params_rank0.bin"))
      << "the written checkpoint, loaded without acc-launch";
  for (int r = 0; r < world; ++r) {
    const std::string name = "/params_rank" + std::to_string(r) + ".bin";
    const auto expected = read_bytes(straight.path() + name);
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(read_bytes(resumed.path() + name), expected) << "rank " << r;
    EXPECT_EQ(read_ints(resumed.path() + "/steps_rank" + std::to_string(r) + ".txt"),
              read_ints(straight.path() + "/steps_rank" + std::to_string(r) + ".txt"));
  }
  EXPECT_FALSE(std::filesystem::exists(resumed.path() + "/ckpt.tmp"));
}

TEST(CheckpointTest, AKilledAndRestartedRunEndsBitForBitLikeAnUninterruptedOne) {
  expect_resume_matches_uninterrupted_run(2);
}

}  // namespace

// The NCCL and CUDA paths, one rank per GPU: a group joined over NCCL, a collective on CUDA
// tensors, DDP steps in fp32, under bf16 autocast, and under fp16 autocast with the gradient
// scaler (an overflowing step skipped, the scale halved). Skipped where CUDA is not available.
class CudaPrecisionTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaPrecisionTest, NcclGroupCollectiveAndDdpStepsRunOnTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device (or a CPU-only LibTorch)";
  const int gpus = static_cast<int>(torch::cuda::device_count());
  auto result = run("env -u ACCELERATE_USE_CPU " + launch(gpus, "cuda " + GetParam()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("cuda " + GetParam() + " ok: " + std::to_string(gpus) +
                               " rank(s) over nccl"),
            std::string::npos)
      << result.output;
  std::cout << result.output;
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaPrecisionTest, ::testing::Values("no", "bf16", "fp16"));

TEST(CudaDataParallelTest, DdpOnTheGpuMatchesOneProcessOnTheConcatenatedBatches) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device (or a CPU-only LibTorch)";
  expect_ddp_matches_one_process(static_cast<int>(torch::cuda::device_count()), 6, 1,
                                 "env -u ACCELERATE_USE_CPU ");
}

// Dropout draws from the CUDA generator here: its state must come back with the checkpoint.
TEST(CudaCheckpointTest, AKilledAndRestartedRunOnTheGpuEndsBitForBitLikeAnUninterruptedOne) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device (or a CPU-only LibTorch)";
  expect_resume_matches_uninterrupted_run(static_cast<int>(torch::cuda::device_count()),
                                          "env -u ACCELERATE_USE_CPU ");
}
