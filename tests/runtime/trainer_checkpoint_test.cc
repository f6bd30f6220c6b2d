// The Trainer's trainer_state.json in a world of one: valid JSON whatever the metric names.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "acc/runtime/runtime.h"
#include "worker_run.h"

namespace {

using acc::testing::TempDir;

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

}  // namespace
