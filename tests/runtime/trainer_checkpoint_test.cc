// The Trainer's checkpoints in a world of one: trainer_state.json valid JSON whatever the metric
// names; save_total_limit and resuming, on storage and (as under acc-launch) in the node's memory.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "acc/common/files.h"
#include "acc/runtime/runtime.h"
#include "worker_run.h"

namespace {

using acc::testing::MemoryUnderTest;
using acc::testing::TempDir;

// A Trainer of a Linear(2, 1) over 8 samples in batches of 2 (4 steps an epoch), saving every step.
struct SmallTrainer {
  explicit SmallTrainer(const std::string& output_dir, int64_t max_steps, int save_total_limit,
                        const std::string& resume_from = "") {
    acc::TrainingArguments args;
    args.output_dir = output_dir;
    args.use_cpu = true;
    args.max_steps = max_steps;
    args.per_device_train_batch_size = 2;
    args.save_steps = 1;
    args.save_total_limit = save_total_limit;
    args.resume_from_checkpoint = resume_from;
    args.disable_tqdm = true;
    torch::manual_seed(0);
    net = torch::nn::Linear(2, 1);
    trainer = std::make_unique<acc::Trainer>(
        net, args, acc::TensorDataset(torch::randn({8, 2}), torch::randn({8, 1})));
    trainer->set_loss(
        [](const torch::Tensor& out, const torch::Tensor& y) { return torch::mse_loss(out, y); });
  }
  torch::nn::Linear net{nullptr};
  std::unique_ptr<acc::Trainer> trainer;
};

std::vector<std::string> checkpoints_in(const std::string& dir) {
  std::vector<std::string> names = acc::names_in(dir, "checkpoint-");
  std::sort(names.begin(), names.end());
  return names;
}

TEST(TrainerCheckpointTest, AMetricNameWithAQuoteAndABackslashRoundTripsThroughTheJson) {
  TempDir dir;
  acc::TrainingArguments args;
  args.output_dir = dir.path() + "/trainer";
  args.use_cpu = true;
  args.max_steps = 1;
  args.per_device_train_batch_size = 4;
  args.per_device_eval_batch_size = 4;
  args.eval_strategy = acc::IntervalStrategy::kSteps;
  args.eval_steps = 1;
  args.logging_steps = 1;
  args.save_steps = 1;
  args.disable_tqdm = true;
  const std::string name = "say \"hi\" C:\\dir";
  torch::manual_seed(0);
  torch::nn::Linear net(2, 1);
  acc::Trainer trainer(net, args, acc::TensorDataset(torch::ones({4, 2}), torch::ones({4, 1})),
                       acc::TensorDataset(torch::ones({4, 2}), torch::ones({4, 1})));
  trainer.set_loss(
      [](const torch::Tensor& out, const torch::Tensor& y) { return torch::mse_loss(out, y); });
  trainer.set_compute_metrics([&](const acc::EvalPrediction&) {
    return acc::Metrics{{name, 0.25}};
  });
  trainer.train();

  std::ifstream in(args.output_dir + "/checkpoint-1/trainer_state.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json state = nlohmann::json::parse(in);  // throws on invalid JSON
  EXPECT_EQ(state.at("global_step"), 1);
  int found = 0;
  for (const auto& entry : state.at("log_history"))
    if (entry.contains("eval_" + name)) {
      EXPECT_EQ(entry.at("eval_" + name), 0.25);
      ++found;
    }
  EXPECT_EQ(found, 1) << state.dump(2);
}

TEST(TrainerCheckpointTest, OnStorageSaveTotalLimitKeepsTheNewestAndLatestResumesFromThem) {
  TempDir dir;
  const std::string out = dir.path() + "/trainer";
  SmallTrainer(out, 5, 2).trainer->train();
  EXPECT_EQ(checkpoints_in(out), (std::vector<std::string>{"checkpoint-4", "checkpoint-5"}));
  EXPECT_TRUE(std::filesystem::exists(out + "/checkpoint-5/trainer_state.pt"));
  EXPECT_TRUE(std::filesystem::exists(out + "/checkpoint-5/model.pt"));

  SmallTrainer resumed(out, 6, 2, "latest");
  EXPECT_EQ(resumed.trainer->latest_checkpoint(), out + "/checkpoint-5");
  EXPECT_EQ(resumed.trainer->train().global_step, 6);

  std::filesystem::create_directories(out + "/checkpoint-9");
  try {
    SmallTrainer(out, 6, 2, out + "/checkpoint-9").trainer->train();
    FAIL() << "an incomplete checkpoint was resumed from";
  } catch (const acc::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a complete Trainer checkpoint"), std::string::npos)
        << e.what();
  }
}

// Under acc-launch the checkpoints go to the node's memory and output_dir gets only what the
// launcher writes (here nothing: no launcher); "latest" finds the newest in memory, and resumes
// from it as from storage.
TEST(TrainerCheckpointTest, UnderAccLaunchTheCheckpointsGoToMemoryAndLatestResumesFromThere) {
  TempDir dir;
  const std::string out = dir.path() + "/trainer";
  std::filesystem::create_directories(dir.path() + "/memory");
  MemoryUnderTest under_acc_launch(dir.path() + "/memory");
  SmallTrainer first(out, 5, 2);
  first.trainer->train();
  EXPECT_TRUE(checkpoints_in(out).empty()) << "no directory made for a save in memory";
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/memory/libacc.5/trainer_state.pt"));

  SmallTrainer resumed(out, 5, 2, "latest");
  EXPECT_EQ(resumed.trainer->latest_checkpoint(), out + "/checkpoint-5");
  const auto output = resumed.trainer->train();
  EXPECT_EQ(output.global_step, 5) << "resumed at step 5 of 5: nothing left to do";
  EXPECT_TRUE(torch::equal(resumed.net->weight, first.net->weight));
}

}  // namespace
