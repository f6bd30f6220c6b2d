// acc::Trainer: the training loop, evaluation and logging. Checkpoints are in
// trainer_checkpoint.cc, the schedule in lr_schedule.cc.

#include "acc/runtime/trainer.h"
#include "acc/common/clock.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>

#include "acc/common/error.h"
#include "progress_bar.h"

namespace acc {
namespace {

AcceleratorOptions accelerator_options(const TrainingArguments& args) {
  ACC_CHECK(args.gradient_accumulation_steps >= 1, ConfigError,
            "TrainingArguments: gradient_accumulation_steps must be at least 1, not ",
            args.gradient_accumulation_steps);
  AcceleratorOptions options;
  options.mixed_precision = args.mixed_precision;
  options.gradient_accumulation_steps = args.gradient_accumulation_steps;
  options.cpu = args.use_cpu;
  return options;
}

void check_arguments(const TrainingArguments& args) {
  ACC_CHECK(args.per_device_train_batch_size > 0 && args.per_device_eval_batch_size > 0,
            ConfigError, "TrainingArguments: the per-device batch sizes must be at least 1");
  ACC_CHECK(args.max_steps > 0 || args.num_train_epochs > 0, ConfigError,
            "TrainingArguments: set num_train_epochs or max_steps to at least 1");
  ACC_CHECK(args.learning_rate >= 0 && args.max_grad_norm >= 0 && args.warmup_steps >= 0 &&
                args.warmup_ratio >= 0 && args.warmup_ratio <= 1,
            ConfigError,
            "TrainingArguments: learning_rate, max_grad_norm and warmup_steps must not be "
            "negative, warmup_ratio must be in [0, 1]");
  ACC_CHECK(args.logging_strategy != IntervalStrategy::kSteps || args.logging_steps > 0,
            ConfigError, "TrainingArguments: logging_strategy steps needs logging_steps > 0");
  ACC_CHECK(args.save_strategy != IntervalStrategy::kSteps || args.save_steps > 0, ConfigError,
            "TrainingArguments: save_strategy steps needs save_steps > 0");
  ACC_CHECK(args.eval_strategy != IntervalStrategy::kSteps || args.eval_steps > 0 ||
                args.logging_steps > 0,
            ConfigError, "TrainingArguments: eval_strategy steps needs eval_steps > 0");
  ACC_CHECK(args.save_total_limit >= 0, ConfigError,
            "TrainingArguments: save_total_limit must not be negative");
}

DataLoader make_loader(const TensorDataset& dataset, size_t batch_size, bool shuffle,
                       bool drop_last, uint64_t seed) {
  DataLoaderOptions options;
  options.batch_size = batch_size;
  options.shuffle = shuffle;
  options.drop_last = drop_last;
  options.seed = seed;
  return DataLoader(dataset, options);
}

// Accuracy when the outputs are class scores and the targets class indices.
Metrics default_metrics(const EvalPrediction& prediction) {
  const auto& p = prediction.predictions;
  const auto& y = prediction.label_ids;
  if (p.dim() != 2 || y.dim() != 1 || p.size(0) != y.size(0) || p.size(0) == 0 ||
      !c10::isIntegralType(y.scalar_type(), /*includeBool=*/false))
    return {};
  const auto correct = p.argmax(1).eq(y).sum().item<int64_t>();
  return {{"accuracy", static_cast<double>(correct) / static_cast<double>(y.size(0))}};
}

// One log line, as transformers prints them: {'loss': 0.3512, 'learning_rate': 0.001, ...}.
std::string format_logs(const Metrics& logs) {
  std::ostringstream out;
  out << '{';
  const char* separator = "";
  for (const auto& [name, value] : logs) {
    out << separator << '\'' << name << "': ";
    if (value == std::floor(value) && std::abs(value) < 1e15)
      out << static_cast<long long>(value);
    else
      out << value;
    separator = ", ";
  }
  out << '}';
  return out.str();
}

}  // namespace

Trainer::Trainer(std::shared_ptr<torch::nn::Module> model, ForwardFunction forward,
                 TrainingArguments args, std::optional<TensorDataset> train_dataset,
                 std::optional<TensorDataset> eval_dataset)
    : args_(std::move(args)),
      model_(std::move(model)),
      forward_(std::move(forward)),
      loss_([](const torch::Tensor& output, const torch::Tensor& target) {
        return torch::nn::functional::cross_entropy(output, target);
      }),
      compute_metrics_(default_metrics) {
  ACC_CHECK(model_ != nullptr && forward_, ConfigError, "Trainer: the model is null");
  check_arguments(args_);
  accelerator_ = std::make_unique<Accelerator>(accelerator_options(args_));
  accelerator_->set_seed(args_.seed);
  accelerator_->prepare(model_);
  const uint64_t data_seed = args_.data_seed ? *args_.data_seed : args_.seed;
  if (train_dataset)
    train_loader_.emplace(accelerator_->prepare(
        make_loader(*train_dataset, args_.per_device_train_batch_size, /*shuffle=*/true,
                    args_.dataloader_drop_last, data_seed)));
  if (eval_dataset)
    eval_loader_.emplace(accelerator_->prepare(make_loader(
        *eval_dataset, args_.per_device_eval_batch_size, /*shuffle=*/false, false, data_seed)));
  state_.is_world_process_zero = accelerator_->is_main_process();
  state_.is_local_process_zero = accelerator_->is_local_main_process();
}

Trainer::~Trainer() = default;

Trainer& Trainer::set_loss(LossFunction loss) {
  ACC_CHECK(static_cast<bool>(loss), ConfigError, "Trainer::set_loss: the function is empty");
  loss_ = std::move(loss);
  return *this;
}

Trainer& Trainer::set_compute_metrics(MetricsFunction compute_metrics) {
  compute_metrics_ = std::move(compute_metrics);
  return *this;
}

Trainer& Trainer::set_optimizer(std::shared_ptr<torch::optim::Optimizer> optimizer) {
  ACC_CHECK(!prepared_optimizer_, ConfigError,
            "Trainer::set_optimizer: call it before train(), which prepared the optimizer");
  ACC_CHECK(optimizer != nullptr, ConfigError, "Trainer::set_optimizer: the optimizer is null");
  optimizer_ = std::move(optimizer);
  return *this;
}

Trainer& Trainer::add_callback(std::shared_ptr<TrainerCallback> callback) {
  ACC_CHECK(callback != nullptr, ConfigError, "Trainer::add_callback: the callback is null");
  callbacks_.push_back(std::move(callback));
  return *this;
}

void Trainer::create_optimizer() {
  auto options = torch::optim::AdamWOptions(args_.learning_rate)
                     .betas({args_.adam_beta1, args_.adam_beta2})
                     .eps(args_.adam_epsilon)
                     .weight_decay(args_.weight_decay);
  optimizer_ = std::make_shared<torch::optim::AdamW>(model_->parameters(), options);
}

void Trainer::set_learning_rate() {
  const double factor =
      lr_factor(args_.lr_scheduler_type, state_.global_step, warmup_steps_, state_.max_steps);
  auto& groups = optimizer_->param_groups();
  for (size_t i = 0; i < groups.size() && i < base_lrs_.size(); ++i)
    groups[i].options().set_lr(base_lrs_[i] * factor);
}

TrainOutput Trainer::train() {
  ACC_CHECK(train_loader_.has_value(), ConfigError,
            "Trainer::train: no train dataset was given to the Trainer");
  Accelerator& acc = *accelerator_;
  DataLoader& loader = *train_loader_;
  prepare_optimizer();
  const auto batches = static_cast<int64_t>(loader.size());
  ACC_CHECK(batches > 0, ConfigError, "Trainer::train: the train dataset gives no batch (",
            loader.dataset().size(), " samples, batch ", args_.per_device_train_batch_size,
            " on each of ", acc.num_processes(), " processes, drop_last)");
  plan_steps(batches);
  loader.set_epoch(0);
  resume_if_asked();

  const auto options = torch::TensorOptions().device(acc.device()).dtype(torch::kDouble);
  loss_since_log_ = torch::zeros({}, options);
  loss_total_ = torch::zeros({}, options);
  batches_since_log_ = 0;
  batches_total_ = 0;
  const int64_t first_step = state_.global_step;
  acc.print("***** Running training *****\n  Num examples = ", loader.dataset().size(),
            "\n  Num epochs = ", state_.num_train_epochs,
            "\n  Num processes = ", acc.num_processes(),
            "\n  Per-device batch size = ", args_.per_device_train_batch_size,
            "\n  Gradient accumulation steps = ", acc.gradient_accumulation_steps(),
            "\n  Total optimization steps = ", state_.max_steps,
            first_step > 0 ? "\n  Resumed at step " + std::to_string(first_step) : "");
  runtime::detail::ProgressBar bar(acc.is_main_process() && !args_.disable_tqdm, state_.max_steps,
                                   first_step);
  bar_ = &bar;
  const auto start = acc::Clock::machine().now();
  control_ = TrainerControl{};
  // A run resumed from its last step has no step left.
  control_.should_training_stop = state_.global_step >= state_.max_steps;
  for (auto& callback : callbacks_) callback->on_train_begin(args_, state_, control_);

  int64_t skip = state_.batches_in_epoch;
  const auto parameters = model_->parameters();
  for (auto epoch = static_cast<int>(loader.epoch());
       epoch < state_.num_train_epochs && !control_.should_training_stop; ++epoch) {
    train_epoch(epoch, batches, skip, parameters);
    skip = 0;
  }

  for (auto& callback : callbacks_) callback->on_train_end(args_, state_, control_);
  loss_total_ += loss_since_log_;
  batches_total_ += batches_since_log_;
  loss_since_log_.zero_();
  batches_since_log_ = 0;
  bar.close();
  bar_ = nullptr;
  const double seconds = acc::Clock::machine().seconds_since(start);
  TrainOutput output = train_output(seconds, first_step);
  log(output.metrics);
  return output;
}

// The optimizer the first train() prepares (AdamW unless one was set), and the schedule's base.
void Trainer::prepare_optimizer() {
  if (prepared_optimizer_) return;
  if (!optimizer_) create_optimizer();
  for (auto& group : optimizer_->param_groups()) base_lrs_.push_back(group.options().get_lr());
  prepared_optimizer_.emplace(accelerator_->prepare(*optimizer_));
}

// A fresh state: the optimizer steps of an epoch of `batches`, how many epochs or steps (whichever
// the arguments bound), and the warmup.
void Trainer::plan_steps(int64_t batches) {
  const int64_t accumulation = accelerator_->gradient_accumulation_steps();
  state_ = TrainerState{};
  state_.is_world_process_zero = accelerator_->is_main_process();
  state_.is_local_process_zero = accelerator_->is_local_main_process();
  state_.steps_per_epoch = (batches + accumulation - 1) / accumulation;
  if (args_.max_steps > 0) {
    state_.max_steps = args_.max_steps;
    state_.num_train_epochs =
        static_cast<int>((args_.max_steps + state_.steps_per_epoch - 1) / state_.steps_per_epoch);
  } else {
    state_.num_train_epochs = args_.num_train_epochs;
    state_.max_steps = args_.num_train_epochs * state_.steps_per_epoch;
  }
  warmup_steps_ = args_.warmup_steps > 0
                      ? args_.warmup_steps
                      : static_cast<int64_t>(
                            std::ceil(args_.warmup_ratio * static_cast<double>(state_.max_steps)));
}

// resume_from_checkpoint: "latest" (the newest in output_dir, if any) or a checkpoint's path.
void Trainer::resume_if_asked() {
  std::string checkpoint;
  if (args_.resume_from_checkpoint == "latest") {
    checkpoint = latest_checkpoint();
    if (checkpoint.empty())
      accelerator_->print("no checkpoint in ", args_.output_dir, " to resume from: starting fresh");
  } else if (!args_.resume_from_checkpoint.empty()) {
    checkpoint = args_.resume_from_checkpoint;
  }
  if (!checkpoint.empty()) resume(checkpoint);
}

// One epoch of `batches`, less the first `skip` a resumed checkpoint had consumed; stops early
// when a callback or the step limit says so.
void Trainer::train_epoch(int epoch, int64_t batches, int64_t skip,
                          const std::vector<torch::Tensor>& parameters) {
  Accelerator& acc = *accelerator_;
  control_.should_epoch_stop = false;
  for (auto& callback : callbacks_) callback->on_epoch_begin(args_, state_, control_);
  int64_t index = 0;
  bool step_begun = false;
  for (const auto& batch : *train_loader_) {
    // A resumed epoch skips what the checkpoint had consumed: the order is the epoch's.
    if (index < skip) {
      ++index;
      continue;
    }
    if (!step_begun) {
      for (auto& callback : callbacks_) callback->on_step_begin(args_, state_, control_);
      step_begun = true;
    }
    accumulate(batch);
    ++index;
    if (!acc.sync_gradients()) continue;

    step_begun = false;
    double grad_norm = std::numeric_limits<double>::quiet_NaN();
    if (args_.max_grad_norm > 0) grad_norm = acc.clip_grad_norm_(parameters, args_.max_grad_norm);
    set_learning_rate();
    prepared_optimizer_->step();
    prepared_optimizer_->zero_grad();
    ++state_.global_step;
    state_.batches_in_epoch = index;
    state_.epoch = epoch + static_cast<double>(index) / static_cast<double>(batches);
    bar_->update(state_.global_step, state_.epoch);
    flow_at_step_end();
    for (auto& callback : callbacks_) callback->on_step_end(args_, state_, control_);
    maybe_log_save_evaluate(grad_norm);
    if (control_.should_epoch_stop || control_.should_training_stop) break;
  }
  if (index == batches) {
    state_.batches_in_epoch = 0;
    state_.epoch = epoch + 1;
  }
  flow_at_epoch_end();
  for (auto& callback : callbacks_) callback->on_epoch_end(args_, state_, control_);
  maybe_log_save_evaluate(std::numeric_limits<double>::quiet_NaN());
}

// One micro-batch: forward under autocast, backward under the accumulation context, and its loss
// added to the sums the log lines read.
void Trainer::accumulate(const Batch& batch) {
  Accelerator& acc = *accelerator_;
  torch::Tensor loss;
  {
    auto sync = acc.accumulate();
    {
      auto autocast = acc.autocast();
      loss = loss_(forward_(batch.data), batch.target);
    }
    acc.backward(loss);
  }
  loss_since_log_ += loss.detach().to(torch::kDouble);
  ++batches_since_log_;
}

// What train() returns: the mean training loss over every process and the run's rates, from the
// step it started at.
TrainOutput Trainer::train_output(double seconds, int64_t first_step) {
  Accelerator& acc = *accelerator_;
  TrainOutput output;
  output.global_step = state_.global_step;
  // Every tensor a collective sees is on the Accelerator's device: NCCL has no CPU backend.
  const auto total_batches =
      acc.reduce(torch::full({1}, static_cast<double>(batches_total_),
                             torch::TensorOptions(torch::kDouble).device(acc.device())));
  const auto total_loss = acc.reduce(loss_total_.reshape({1}));
  output.training_loss = total_batches.item<double>() > 0
                             ? total_loss.item<double>() / total_batches.item<double>()
                             : 0.0;
  const auto steps = static_cast<double>(state_.global_step - first_step);
  const int64_t accumulation = acc.gradient_accumulation_steps();
  output.metrics = {
      {"train_runtime", seconds},
      {"train_steps_per_second", seconds > 0 ? steps / seconds : 0},
      {"train_samples_per_second",
       seconds > 0
           ? steps *
                 static_cast<double>(accumulation * acc.num_processes() *
                                     static_cast<int64_t>(args_.per_device_train_batch_size)) /
                 seconds
           : 0},
      {"train_loss", output.training_loss},
      {"epoch", state_.epoch}};
  return output;
}

// transformers' DefaultFlowCallback: what the strategies ask for after this step.
void Trainer::flow_at_step_end() {
  const int64_t step = state_.global_step;
  if (args_.logging_first_step && step == 1) control_.should_log = true;
  if (args_.logging_strategy == IntervalStrategy::kSteps && step % args_.logging_steps == 0)
    control_.should_log = true;
  const int64_t eval_steps = args_.eval_steps > 0 ? args_.eval_steps : args_.logging_steps;
  if (args_.eval_strategy == IntervalStrategy::kSteps && step % eval_steps == 0)
    control_.should_evaluate = true;
  if (args_.save_strategy == IntervalStrategy::kSteps && step % args_.save_steps == 0)
    control_.should_save = true;
  if (step >= state_.max_steps) {
    control_.should_training_stop = true;
    if (args_.save_strategy != IntervalStrategy::kNo) control_.should_save = true;
  }
}

void Trainer::flow_at_epoch_end() {
  if (args_.logging_strategy == IntervalStrategy::kEpoch) control_.should_log = true;
  if (args_.eval_strategy == IntervalStrategy::kEpoch) control_.should_evaluate = true;
  if (args_.save_strategy == IntervalStrategy::kEpoch) control_.should_save = true;
}

void Trainer::maybe_log_save_evaluate(double grad_norm) {
  Accelerator& acc = *accelerator_;
  if (control_.should_log) {
    control_.should_log = false;
    if (batches_since_log_ > 0) {
      // Every process's mean micro-batch loss since the last line, averaged over the processes.
      const double mean =
          acc.reduce(loss_since_log_.reshape({1}), Reduction::kMean).item<double>() /
          static_cast<double>(batches_since_log_);
      loss_total_ += loss_since_log_;
      batches_total_ += batches_since_log_;
      loss_since_log_.zero_();
      batches_since_log_ = 0;
      Metrics logs{{"loss", mean},
                   {"learning_rate", optimizer_->param_groups()[0].options().get_lr()},
                   {"epoch", state_.epoch}};
      if (!std::isnan(grad_norm)) logs["grad_norm"] = grad_norm;
      log(std::move(logs));
    }
  }
  if (control_.should_evaluate) {
    control_.should_evaluate = false;
    if (eval_loader_) evaluate();
  }
  if (control_.should_save) {
    control_.should_save = false;
    if (last_saved_step_ != state_.global_step) save_checkpoint();
  }
}

void Trainer::log(Metrics logs) {
  logs["step"] = static_cast<double>(state_.global_step);
  if (logs.count("epoch") == 0) logs["epoch"] = state_.epoch;
  state_.log_history.push_back(logs);
  if (accelerator_->is_main_process()) {
    if (bar_ != nullptr)
      bar_->print(format_logs(logs));
    else
      std::cout << format_logs(logs) << std::endl;
  }
  for (auto& callback : callbacks_) callback->on_log(args_, state_, control_, logs);
}

Metrics Trainer::evaluate() {
  ACC_CHECK(eval_loader_.has_value(), ConfigError,
            "Trainer::evaluate: no eval dataset was given to the Trainer");
  return evaluate(eval_loader_->dataset(), "eval");
}

Metrics Trainer::evaluate(const TensorDataset& dataset, const std::string& prefix) {
  Accelerator& acc = *accelerator_;
  // The prepared eval loader for the eval dataset; another dataset gets a loader of its own.
  const bool own = eval_loader_ && eval_loader_->dataset().data().is_same(dataset.data()) &&
                   eval_loader_->dataset().targets().is_same(dataset.targets());
  std::optional<DataLoader> other;
  if (!own)
    other.emplace(acc.prepare(
        make_loader(dataset, args_.per_device_eval_batch_size, false, false, args_.seed)));
  DataLoader& loader = own ? *eval_loader_ : *other;

  const auto start = acc::Clock::machine().now();
  const bool was_training = model_->is_training();
  model_->eval();
  std::vector<torch::Tensor> predictions, labels, losses;
  {
    torch::NoGradGuard no_grad;
    for (const auto& batch : loader) {
      torch::Tensor output, loss;
      {
        auto autocast = acc.autocast();
        output = forward_(batch.data);
        loss = loss_(output, batch.target);
      }
      // gather_for_metrics drops the samples the last round repeated: each sample counts once.
      losses.push_back(
          acc.gather_for_metrics(
                 loss.detach().to(torch::kDouble).reshape({1}).repeat({batch.target.size(0)}))
              .cpu());
      predictions.push_back(acc.gather_for_metrics(output.detach().to(torch::kFloat)).cpu());
      labels.push_back(acc.gather_for_metrics(batch.target).cpu());
    }
  }
  model_->train(was_training);

  Metrics metrics;
  EvalPrediction prediction;
  if (!predictions.empty()) {
    prediction.predictions = torch::cat(predictions);
    prediction.label_ids = torch::cat(labels);
    metrics[prefix + "_loss"] = torch::cat(losses).mean().item<double>();
  }
  const int64_t samples = prediction.label_ids.defined() ? prediction.label_ids.size(0) : 0;
  if (compute_metrics_ && samples > 0)
    for (const auto& [name, value] : compute_metrics_(prediction))
      metrics[name.rfind(prefix + "_", 0) == 0 ? name : prefix + "_" + name] = value;
  metrics[prefix + "_samples"] = static_cast<double>(samples);
  metrics[prefix + "_runtime"] = acc::Clock::machine().seconds_since(start);
  log(metrics);
  for (auto& callback : callbacks_) callback->on_evaluate(args_, state_, control_, metrics);
  return metrics;
}

}  // namespace acc
