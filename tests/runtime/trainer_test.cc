// acc::Trainer with real processes: acc-launch starts trainer_worker over Gloo on the loopback.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "acc/common/files.h"
#include "worker_run.h"

namespace {

using acc::testing::read_bytes;
using acc::testing::Result;
using acc::testing::run;
using acc::testing::TempDir;

// Gloo tests: the processes stay on the CPU even where CUDA is available.
[[maybe_unused]] const bool kGlooTests = setenv("ACCELERATE_USE_CPU", "1", 1) == 0;

std::string launch(int nproc, const std::string& args, const std::string& extra = "") {
  return acc::testing::launch_command(nproc, TRAINER_WORKER_BIN, args, extra);
}

std::vector<double> read_numbers(const std::string& path) {
  std::ifstream in(path);
  std::vector<double> values;
  for (double v = 0; in >> v;) values.push_back(v);
  return values;
}

// Both ranks of both runs hold the same parameters, to the last bit.
void expect_same_params(const std::string& a, const std::string& b, int world) {
  for (int r = 0; r < world; ++r) {
    const std::string name = "/params_rank" + std::to_string(r) + ".bin";
    const auto expected = read_bytes(a + name);
    ASSERT_GT(expected.size(), 1000u) << a + name;
    EXPECT_TRUE(read_bytes(b + name) == expected) << "rank " << r << " differs";
    EXPECT_EQ(read_numbers(b + "/steps_rank" + std::to_string(r) + ".txt"),
              read_numbers(a + "/steps_rank" + std::to_string(r) + ".txt"));
  }
}

void expect_trainer_matches_hand_loop(int steps, int accumulation) {
  TempDir trainer, hand;
  const std::string tail = " " + std::to_string(steps) + " " + std::to_string(accumulation);
  auto t = run(launch(2, "trainer " + trainer.path() + tail));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  auto h = run(launch(2, "hand " + hand.path() + tail));
  ASSERT_EQ(h.exit_code, 0) << h.output;
  expect_same_params(hand.path(), trainer.path(), 2);
  EXPECT_NE(t.output.find("'eval_samples': 13"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("'loss': "), std::string::npos) << t.output;
}

// 14 steps: past the warmup (3) and over two epochs (6 steps each), with dropout, clipping and
// evaluations every 3 steps on the Trainer's side.
TEST(TrainerTest, MatchesAHandWrittenLibaccLoopBitForBitOnTwoProcesses) {
  expect_trainer_matches_hand_loop(14, 1);
}

TEST(TrainerTest, MatchesAHandWrittenLoopBitForBitWithGradientAccumulation) {
  expect_trainer_matches_hand_loop(7, 2);
}

// Rank 1 is SIGKILLed after step 10 (epoch 2 of 3, 4 batches into it); acc-launch restarts the
// group, the Trainer resumes from checkpoint-8 (2 batches into epoch 2: mid-epoch), which it
// saved into the node's memory, and must end bit for bit like a run that was never interrupted.
TEST(TrainerTest, KilledMidEpochAndResumedEndsBitForBitLikeAnUninterruptedRun) {
  TempDir straight, resumed;
  auto a = run(launch(2, "resume " + straight.path() + " 0"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = run("ACC_LOG_LEVEL=debug " +
               launch(2, "resume " + resumed.path() + " 10", "--max_restarts 1"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("killing rank 1 at step 10"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("checkpoint-8 (step 8, epoch 1.33333"), std::string::npos)
      << "resumed mid-epoch from the latest checkpoint:\n"
      << b.output;
  EXPECT_TRUE(
      std::regex_search(b.output, std::regex("loaded state \\(step 8\\) from /.*/libacc\\.")))
      << "from the node's memory:\n"
      << b.output;
  expect_same_params(straight.path(), resumed.path(), 2);
  EXPECT_EQ(read_numbers(resumed.path() + "/steps_rank0.txt"), std::vector<double>{18});
  // The launcher wrote the last checkpoint to output_dir at the job's end, whole; with
  // save_total_limit 2, at most one other stays beside it, and no incomplete directory.
  for (const std::string& run : {straight.path(), resumed.path()}) {
    const std::string dir = run + "/trainer/";
    std::vector<std::string> complete;
    for (const std::string& name : acc::names_in(dir, "checkpoint-"))
      if (std::filesystem::exists(dir + name + "/trainer_state.pt") &&
          std::filesystem::exists(dir + name + "/trainer_state.json") &&
          std::filesystem::exists(dir + name + "/model.pt"))
        complete.push_back(name);
    EXPECT_TRUE(std::count(complete.begin(), complete.end(), "checkpoint-18")) << run;
    EXPECT_LE(complete.size(), 2u) << run;
    EXPECT_EQ(acc::names_in(dir, "checkpoint-").size(), complete.size()) << run;
  }
  // What the launcher wrote is a whole checkpoint: a new job, whose nodes' memory is empty (as
  // after a requeue), resumes from checkpoint-18 in output_dir, the last step, and ends there
  // with the same parameters.
  TempDir requeued;
  std::filesystem::copy(resumed.path() + "/trainer", requeued.path() + "/trainer",
                        std::filesystem::copy_options::recursive);
  auto c = run(launch(2, "resume " + requeued.path() + " 0"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("resuming from " + requeued.path() + "/trainer/checkpoint-18 (step 18"),
            std::string::npos)
      << c.output;
  expect_same_params(straight.path(), requeued.path(), 2);
}

// 37 samples, eval batch 4, 2 ranks: 10 batches of 4 go round, 3 of them repeats. A model right
// on sample 0 only must score 1 of 37, with every sample seen exactly once.
TEST(TrainerTest, EvaluationCountsEverySampleOnceWhenTheLastRoundIsPadded) {
  TempDir dir;
  auto result = run(launch(2, "metrics " + dir.path() + " 37"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto metrics = read_numbers(dir.path() + "/metrics.txt");
  ASSERT_EQ(metrics.size(), 2u) << result.output;
  EXPECT_EQ(metrics[0], 37) << "eval_samples";
  EXPECT_NEAR(metrics[1], 1.0, 1e-9) << "eval_accuracy * 37: one right answer";
  auto labels = read_numbers(dir.path() + "/labels.txt");
  ASSERT_EQ(labels.size(), 37u);
  for (size_t i = 0; i < labels.size(); ++i) EXPECT_EQ(labels[i], static_cast<double>(i));
}

}  // namespace
