#pragma once

// acc::Trainer: a complete data-parallel training loop over the Accelerator, as HuggingFace's
// Trainer is over Accelerate. Give it a model, TrainingArguments and datasets:
//
//   acc::TrainingArguments args;
//   args.output_dir = "out";
//   args.learning_rate = 1e-3;
//   args.eval_strategy = acc::IntervalStrategy::kEpoch;
//   acc::Trainer trainer(net, args, train_dataset, test_dataset);
//   trainer.set_loss([](const torch::Tensor& out, const torch::Tensor& y) {
//     return torch::nll_loss(out, y);
//   });
//   trainer.train();                               // acc-launch --nproc_per_node 2 ./train
//   auto metrics = trainer.evaluate();             // {"eval_accuracy", "eval_loss", ...}
//
// Each process reads its shard of the data, gradients are averaged over the processes as in
// PyTorch's DDP, metrics count every evaluation sample exactly once (gather_for_metrics), and
// the main process draws a progress bar and prints log lines. Checkpoints go to
// output_dir/checkpoint-<step>; with resume_from_checkpoint = "latest" a run (or a restart by
// acc-launch --max_restarts) continues from the newest one bit for bit, mid-epoch included.
//
// Thread-safety: a Trainer is used from one thread. train() and evaluate() are collective: every
// process calls them. Errors: acc::ConfigError for bad arguments or a broken checkpoint,
// acc::BackendError / acc::TimeoutError from the Accelerator's collectives; an exception thrown
// by a callback or the loss function propagates out of train().

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "acc/runtime/accelerator.h"
#include "acc/runtime/data_loader.h"

namespace acc {
namespace runtime::detail {
class ProgressBar;
}

// When to log, evaluate or save: never, every N optimizer steps, or at the end of each epoch.
enum class IntervalStrategy { kNo, kSteps, kEpoch };
// Parses "no", "steps", "epoch". Throws acc::ConfigError naming `what`.
IntervalStrategy parse_interval_strategy(const std::string& value, const std::string& what);

// The learning-rate schedules of transformers' get_scheduler.
enum class SchedulerType { kConstant, kConstantWithWarmup, kLinear, kCosine };
// Parses "constant", "constant_with_warmup", "linear", "cosine". Throws acc::ConfigError.
SchedulerType parse_scheduler_type(const std::string& value);

// The factor the base learning rate is multiplied by for optimizer step `step` (0-based) of
// `total_steps`, the first `warmup_steps` of which ramp up linearly from 0 (transformers'
// lr_lambda functions: linear decays to 0 at total_steps, cosine follows half a cosine to 0).
double lr_factor(SchedulerType type, int64_t step, int64_t warmup_steps, int64_t total_steps);

// The options of a training run, named and defaulted as transformers' TrainingArguments.
struct TrainingArguments {
  // Checkpoints go to output_dir/checkpoint-<global step>.
  std::string output_dir = "trainer_output";
  // Length: num_train_epochs passes over the data, unless max_steps > 0 optimizer steps.
  int num_train_epochs = 3;
  int64_t max_steps = -1;
  // Samples per process per forward pass (the global batch is this times the processes times
  // gradient_accumulation_steps).
  size_t per_device_train_batch_size = 8;
  size_t per_device_eval_batch_size = 8;
  int gradient_accumulation_steps = 1;
  // AdamW, created by the Trainer unless set_optimizer() gave another optimizer.
  double learning_rate = 5e-5;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  // Gradients are clipped to this total norm before each step; 0 disables clipping.
  double max_grad_norm = 1.0;
  SchedulerType lr_scheduler_type = SchedulerType::kLinear;
  // Warmup steps; when 0, ceil(warmup_ratio * total steps).
  int64_t warmup_steps = 0;
  double warmup_ratio = 0.0;
  // Unset: ACCELERATE_MIXED_PRECISION (set by acc-launch --mixed_precision), else no.
  std::optional<MixedPrecision> mixed_precision;
  // Stay on the CPU even when CUDA is available.
  bool use_cpu = false;
  // Evaluation on the eval dataset; eval_steps 0 means logging_steps.
  IntervalStrategy eval_strategy = IntervalStrategy::kNo;
  int64_t eval_steps = 0;
  // Checkpoints; save_total_limit > 0 keeps only that many of the newest.
  IntervalStrategy save_strategy = IntervalStrategy::kSteps;
  int64_t save_steps = 500;
  int save_total_limit = 0;
  // Log lines (mean training loss over the interval, learning rate, epoch) on the main process.
  IntervalStrategy logging_strategy = IntervalStrategy::kSteps;
  int64_t logging_steps = 500;
  bool logging_first_step = false;
  // No progress bar (log lines stay).
  bool disable_tqdm = false;
  // Seeds torch's generators when the Trainer is constructed (the same on every process).
  uint64_t seed = 42;
  // The shuffle of epoch e is drawn from data_seed + e; unset: seed.
  std::optional<uint64_t> data_seed;
  bool dataloader_drop_last = false;
  // "": start fresh. "latest": continue from the newest complete checkpoint in output_dir when
  // there is one (else start fresh). Anything else: that checkpoint directory.
  std::string resume_from_checkpoint;
};

using Metrics = std::map<std::string, double>;

// What the callbacks see: where the run is. `epoch` is fractional (1.5: half-way through the
// second epoch); `log_history` holds every log line and evaluation, in order.
struct TrainerState {
  double epoch = 0;
  int64_t global_step = 0;
  int64_t max_steps = 0;
  int num_train_epochs = 0;
  int64_t steps_per_epoch = 0;
  // Batches of the current epoch already consumed (how far a mid-epoch resume skips).
  int64_t batches_in_epoch = 0;
  bool is_world_process_zero = false;
  bool is_local_process_zero = false;
  std::vector<Metrics> log_history;
};

// Flags the callbacks set to steer the loop; the loop clears each after acting on it.
struct TrainerControl {
  bool should_training_stop = false;
  bool should_epoch_stop = false;
  bool should_save = false;
  bool should_evaluate = false;
  bool should_log = false;
};

// Hooks into the loop, as transformers' TrainerCallback: override what you need. Called on every
// process (check state.is_world_process_zero to act once), in the order they were added, after
// the Trainer's own flow has set `control` from the strategies, so a callback can override it.
class TrainerCallback {
 public:
  virtual ~TrainerCallback() = default;
  virtual void on_train_begin(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_train_end(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_epoch_begin(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_epoch_end(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  // Around one optimizer step (all its accumulated micro-batches).
  virtual void on_step_begin(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_step_end(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_evaluate(const TrainingArguments&, TrainerState&, TrainerControl&,
                           const Metrics& /*metrics*/) {}
  // After checkpoint `dir` is complete.
  virtual void on_save(const TrainingArguments&, TrainerState&, TrainerControl&,
                       const std::string& /*dir*/) {}
  virtual void on_log(const TrainingArguments&, TrainerState&, TrainerControl&,
                      const Metrics& /*logs*/) {}
};

// Every evaluation sample's model output and target, in dataset order, on every process.
struct EvalPrediction {
  torch::Tensor predictions;
  torch::Tensor label_ids;
};

using ForwardFunction = std::function<torch::Tensor(const torch::Tensor& input)>;
using LossFunction =
    std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& target)>;
using MetricsFunction = std::function<Metrics(const EvalPrediction&)>;

struct TrainOutput {
  int64_t global_step = 0;
  // Mean training loss over the steps this run took.
  double training_loss = 0;
  // train_runtime (s), train_samples_per_second, train_steps_per_second.
  Metrics metrics;
};

class Trainer {
 public:
  // Joins the worker group (an Accelerator from args: mixed precision, accumulation, CPU),
  // seeds torch with args.seed, prepares the model (moved to the device, rank 0's parameters
  // broadcast: blocks until every process got here) and the data loaders. `model` is a
  // ModuleHolder whose forward takes one tensor (BasicNet, torch::nn::Linear, ...); the Trainer
  // keeps it. Throws acc::ConfigError for inconsistent arguments.
  template <typename Holder,
            typename = std::enable_if_t<
                std::is_base_of<torch::detail::ModuleHolderIndicator, std::decay_t<Holder>>::value>>
  Trainer(Holder model, TrainingArguments args, std::optional<TensorDataset> train_dataset,
          std::optional<TensorDataset> eval_dataset = std::nullopt)
      : Trainer(
            model.ptr(),
            [model](const torch::Tensor& input) mutable { return model->forward(input); },
            std::move(args), std::move(train_dataset), std::move(eval_dataset)) {}
  // The same for any module: `forward` runs it on a batch's input.
  Trainer(std::shared_ptr<torch::nn::Module> model, ForwardFunction forward, TrainingArguments args,
          std::optional<TensorDataset> train_dataset,
          std::optional<TensorDataset> eval_dataset = std::nullopt);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // The loss of a batch from the model's output and the batch's target; default cross-entropy
  // (torch::nn::functional::cross_entropy over logits and class indices).
  Trainer& set_loss(LossFunction loss);
  // Metrics of an evaluation, named without prefix ("accuracy"); default: accuracy when the
  // outputs are [N, classes] and the targets class indices, none otherwise. The loss is always
  // reported (eval_loss).
  Trainer& set_compute_metrics(MetricsFunction compute_metrics);
  // Replaces the default AdamW; its learning rate is still set by the schedule at each step.
  // Call before train(); the Trainer shares ownership.
  Trainer& set_optimizer(std::shared_ptr<torch::optim::Optimizer> optimizer);
  Trainer& add_callback(std::shared_ptr<TrainerCallback> callback);

  // Runs the training loop (resuming first when args.resume_from_checkpoint says so). Blocks
  // until the last step; collective. Throws acc::ConfigError without a train dataset.
  TrainOutput train();
  // Evaluates on the eval dataset (or `dataset`) without changing the model: metrics named
  // "<prefix>_loss", "<prefix>_accuracy", ..., "<prefix>_samples" (samples counted, each once),
  // "<prefix>_runtime". Collective; every process gets the same metrics.
  Metrics evaluate();
  Metrics evaluate(const TensorDataset& dataset, const std::string& prefix = "eval");

  // Saves a checkpoint of the current step to output_dir/checkpoint-<step> (atomically: the
  // directory appears whole, trainer_state.pt in it) and returns its path. Under acc-launch it
  // goes to the node's memory, and the launcher writes the newest to output_dir
  // (docs/checkpoints.md). Collective.
  std::string save_checkpoint();
  // The newest complete checkpoint in output_dir (the main process's view), or under acc-launch
  // the newest in every rank's node's memory where that is newer; "" when there is none.
  // Collective.
  std::string latest_checkpoint();

  Accelerator& accelerator() { return *accelerator_; }
  const TrainingArguments& args() const { return args_; }
  const TrainerState& state() const { return state_; }

 private:
  void create_optimizer();
  // train()'s steps (trainer.cc).
  void prepare_optimizer();
  void plan_steps(int64_t batches);
  void resume_if_asked();
  void train_epoch(int epoch, int64_t batches, int64_t skip,
                   const std::vector<torch::Tensor>& parameters);
  void accumulate(const Batch& batch);
  TrainOutput train_output(double seconds, int64_t first_step);
  void resume(const std::string& checkpoint);
  void set_learning_rate();
  void flow_at_step_end();
  void flow_at_epoch_end();
  void maybe_log_save_evaluate(double grad_norm);
  void log(Metrics logs);
  void write_trainer_state(const std::string& dir) const;
  void prune_checkpoints() const;

  TrainingArguments args_;
  std::unique_ptr<Accelerator> accelerator_;
  std::shared_ptr<torch::nn::Module> model_;
  ForwardFunction forward_;
  LossFunction loss_;
  MetricsFunction compute_metrics_;
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
  std::optional<AcceleratedOptimizer> prepared_optimizer_;
  std::optional<DataLoader> train_loader_;
  std::optional<DataLoader> eval_loader_;
  std::vector<std::shared_ptr<TrainerCallback>> callbacks_;
  TrainerState state_;
  TrainerControl control_;
  runtime::detail::ProgressBar* bar_ = nullptr;  // while train() runs
  // The schedule: each parameter group's learning rate before the first step, and the warmup.
  std::vector<double> base_lrs_;
  int64_t warmup_steps_ = 0;
  int64_t last_saved_step_ = -1;
  // The training loss summed since the last log line (and over the run), in micro-batches.
  torch::Tensor loss_since_log_;
  int64_t batches_since_log_ = 0;
  torch::Tensor loss_total_;
  int64_t batches_total_ = 0;
};

}  // namespace acc
