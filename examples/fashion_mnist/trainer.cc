// BasicNet on Fashion-MNIST with acc::Trainer: the whole training loop (sharded data, DDP,
// schedule, evaluation, checkpoints, progress bar) is the Trainer's. Runs as one process
// (./fashion_mnist_trainer) or data-parallel (acc-launch --nproc_per_node 2
// ./fashion_mnist_trainer).
//
//   --epochs N          epochs to train (3)
//   --data-dir DIR      the idx files (/usr/share/datasets/fashion-mnist)
//   --output-dir DIR    checkpoints, one per epoch (fashion_mnist_output)
//   --resume            continue from the newest checkpoint in --output-dir, if there is one
//   --limit N           train on the first N samples only (quick tests)

#include <iostream>
#include <string>

#include "acc/common/error.h"
#include "acc/runtime/runtime.h"
#include "basic_net.h"
#include "flags.h"
#include "idx.h"

namespace {

acc::TrainingArguments parse_args(int argc, char** argv, std::string& data_dir, int64_t& limit) {
  acc::TrainingArguments args;
  args.output_dir = "fashion_mnist_output";
  args.num_train_epochs = 3;
  args.per_device_train_batch_size = 32;  // 64 a step on 2 processes
  args.per_device_eval_batch_size = 100;
  args.learning_rate = 1e-3;
  args.lr_scheduler_type = acc::SchedulerType::kLinear;
  args.eval_strategy = acc::IntervalStrategy::kEpoch;
  args.save_strategy = acc::IntervalStrategy::kEpoch;
  args.logging_steps = 200;
  using acc::examples::whole_number;
  acc::examples::parse_flags(
      argc, argv,
      {{"--epochs",
        [&](const std::string& v) { args.num_train_epochs = whole_number("--epochs", v, 1); }},
       {"--data-dir", [&](const std::string& v) { data_dir = v; }},
       {"--output-dir", [&](const std::string& v) { args.output_dir = v; }},
       {"--resume", [&](const std::string&) { args.resume_from_checkpoint = "latest"; }, true},
       {"--limit", [&](const std::string& v) { limit = whole_number("--limit", v); }}},
      "trainer.cc");
  return args;
}

acc::TensorDataset load(const std::string& dir, const std::string& split, int64_t limit) {
  auto images = fashion_mnist::read_images(dir, split);
  auto labels = fashion_mnist::read_labels(dir, split);
  if (limit > 0) return {images.slice(0, 0, limit), labels.slice(0, 0, limit)};
  return {images, labels};
}

int run(int argc, char** argv) {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t limit = 0;
  const acc::TrainingArguments args = parse_args(argc, argv, data_dir, limit);

  torch::manual_seed(args.seed);  // the initial weights (rank 0's are broadcast)
  acc::examples::BasicNet net;
  acc::Trainer trainer(net, args, load(data_dir, "train", limit), load(data_dir, "t10k", 0));
  trainer.set_loss([](const torch::Tensor& log_probabilities, const torch::Tensor& target) {
    return torch::nll_loss(log_probabilities, target);
  });
  trainer.train();

  double accuracy = 0;
  for (const auto& entry : trainer.state().log_history)
    if (auto it = entry.find("eval_accuracy"); it != entry.end()) accuracy = it->second;
  trainer.accelerator().print("final test accuracy: ", 100 * accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const acc::ConfigError& e) {
    std::cerr << "fashion_mnist_trainer: " << e.what() << "\n";
    return 2;
  } catch (const acc::Error& e) {
    std::cerr << "fashion_mnist_trainer: " << e.what() << "\n";
    return 1;
  }
}
