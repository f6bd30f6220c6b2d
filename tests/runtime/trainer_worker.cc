// The worker programs of the Trainer tests, one binary with a mode per test, started by
// acc-launch. Writes its results under OUT; exits non-zero with a message on stderr when a check
// it can make itself fails.
//
//   trainer_worker trainer OUT STEPS ACCUM   acc::Trainer for STEPS optimizer steps
//   trainer_worker hand OUT STEPS ACCUM      the same training written by hand over libacc
//   trainer_worker resume OUT KILL_STEP      3 epochs, a checkpoint every 4 steps, resuming from
//                                            the latest; on the first attempt rank 1 SIGKILLs
//                                            itself after step KILL_STEP (0: never)
//   trainer_worker metrics OUT N             evaluate() over N samples that a fixed model gets
//                                            right only for sample 0
// Both training modes write params_rank<R>.bin (raw float32 parameters) and steps_rank<R>.txt.

#include <ATen/CPUGeneratorImpl.h>
#include <signal.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "acc/common/error.h"
#include "acc/runtime/runtime.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "trainer_worker: check failed: " << what << std::endl;
  std::exit(1);
}

struct NetImpl : torch::nn::Module {
  NetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(8, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 4))),
        drop(register_module("drop", torch::nn::Dropout(0.3))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(drop(torch::tanh(fc1(x)))); }
  torch::nn::Linear fc1, fc2;
  torch::nn::Dropout drop;
};
TORCH_MODULE(Net);

// 48 samples: 6 batches of 4 per rank and epoch on 2 ranks.
acc::TensorDataset make_data(int64_t n = 48) {
  auto generator = at::detail::createCPUGenerator(1234);
  auto x = at::randn({n, 8}, generator);
  auto y = at::randn({n, 4}, generator);
  return {x, y};
}

torch::Tensor mse(const torch::Tensor& output, const torch::Tensor& target) {
  return torch::mse_loss(output, target);
}

// Everything both training modes share: the hand loop reads the same fields.
acc::TrainingArguments arguments(const std::string& out, int64_t steps, int accumulation) {
  acc::TrainingArguments args;
  args.output_dir = out + "/trainer";
  args.max_steps = steps;
  args.per_device_train_batch_size = 4;
  args.per_device_eval_batch_size = 5;
  args.gradient_accumulation_steps = accumulation;
  args.learning_rate = 1e-2;
  args.weight_decay = 0.01;
  args.max_grad_norm = 0.5;
  args.lr_scheduler_type = acc::SchedulerType::kLinear;
  args.warmup_steps = 3;
  args.seed = 7;
  args.save_strategy = acc::IntervalStrategy::kNo;
  args.logging_steps = 2;
  args.disable_tqdm = true;
  return args;
}

void write_results(const std::string& out, int rank, const torch::nn::Module& module,
                   int64_t steps) {
  std::ofstream params(out + "/params_rank" + std::to_string(rank) + ".bin", std::ios::binary);
  for (const auto& p : module.parameters()) {
    auto t = p.detach().to(torch::kCPU, torch::kFloat).contiguous();
    params.write(reinterpret_cast<const char*>(t.data_ptr<float>()),
                 static_cast<std::streamsize>(t.numel() * sizeof(float)));
  }
  std::ofstream(out + "/steps_rank" + std::to_string(rank) + ".txt") << steps << "\n";
}

int trainer(const std::string& out, int64_t steps, int accumulation) {
  auto args = arguments(out, steps, accumulation);
  // Evaluating between steps must not change the training (no RNG drawn, no gradient).
  args.eval_strategy = acc::IntervalStrategy::kSteps;
  args.eval_steps = 3;
  torch::manual_seed(args.seed);
  Net net;
  acc::Trainer trainer(net, args, make_data(), make_data(13));
  trainer.set_loss(mse);
  trainer.set_compute_metrics({});
  const auto result = trainer.train();
  if (result.global_step != steps) fail("global_step " + std::to_string(result.global_step));
  if (!std::isfinite(result.training_loss)) fail("the training loss is not finite");
  write_results(out, trainer.accelerator().process_index(), *net, result.global_step);
  return 0;
}

// The loop a libacc user writes by hand, with the Trainer's documented defaults: seed, model,
// seed again (the Trainer seeds when constructed), AdamW, the shuffled loader seeded with the
// seed, linear warmup then decay, clipping, one optimizer step per accumulated batch.
int hand(const std::string& out, int64_t steps, int accumulation) {
  const auto args = arguments(out, steps, accumulation);
  acc::AcceleratorOptions options;
  options.gradient_accumulation_steps = accumulation;
  acc::Accelerator acc(options);
  torch::manual_seed(args.seed);
  Net net;
  acc.set_seed(args.seed);
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(args.learning_rate)
                                                   .betas({0.9, 0.999})
                                                   .eps(1e-8)
                                                   .weight_decay(args.weight_decay));
  acc::DataLoaderOptions lo;
  lo.batch_size = 4;
  lo.shuffle = true;
  lo.seed = args.seed;
  auto [model, optimizer, loader] = acc.prepare(net, adamw, acc::DataLoader(make_data(), lo));
  const int64_t warmup = args.warmup_steps;
  int64_t done = 0;
  while (done < steps) {
    for (const auto& batch : loader) {
      {
        auto sync = acc.accumulate();
        acc.backward(torch::mse_loss(model->forward(batch.data), batch.target));
      }
      if (!acc.sync_gradients()) continue;
      acc.clip_grad_norm_(net->parameters(), args.max_grad_norm);
      const double factor =
          done < warmup ? static_cast<double>(done) / warmup
                        : static_cast<double>(steps - done) / static_cast<double>(steps - warmup);
      adamw.param_groups()[0].options().set_lr(args.learning_rate * factor);
      optimizer.step();
      optimizer.zero_grad();
      if (++done == steps) break;
    }
  }
  write_results(out, acc.process_index(), *net, done);
  return 0;
}

// Dies by SIGKILL, as an OOM kill or a lost node would, after step `step` of the first attempt.
class KillAtStep : public acc::TrainerCallback {
 public:
  KillAtStep(int64_t step, bool armed) : step_(step), armed_(armed) {}
  void on_step_end(const acc::TrainingArguments&, acc::TrainerState& state,
                   acc::TrainerControl&) override {
    if (!armed_ || state.global_step != step_) return;
    std::cerr << "trainer_worker: killing rank 1 at step " << step_ << ", epoch " << state.epoch
              << std::endl;
    raise(SIGKILL);
  }

 private:
  int64_t step_;
  bool armed_;
};

int resume(const std::string& out, int64_t kill_step) {
  auto args = arguments(out, -1, 1);
  args.num_train_epochs = 3;
  args.save_strategy = acc::IntervalStrategy::kSteps;
  args.save_steps = 4;
  args.save_total_limit = 2;
  args.eval_strategy = acc::IntervalStrategy::kEpoch;
  args.resume_from_checkpoint = "latest";
  torch::manual_seed(args.seed);
  Net net;
  acc::Trainer trainer(net, args, make_data(), make_data(13));
  trainer.set_loss(mse);
  trainer.set_compute_metrics({});
  const auto& acc = trainer.accelerator();
  const bool first_attempt = acc.env().restart_count == 0;
  trainer.add_callback(std::make_shared<KillAtStep>(
      kill_step, kill_step > 0 && first_attempt && acc.process_index() == 1));
  const auto result = trainer.train();
  write_results(out, acc.process_index(), *net, result.global_step);
  return 0;
}

// A model that always answers class 0, over samples whose targets are their own indices: exactly
// one sample (index 0) is right. 37 samples in batches of 4 on 2 ranks: the last round repeats 3
// samples, which gather_for_metrics must drop.
int metrics(const std::string& out, int64_t n) {
  acc::TrainingArguments args;
  args.output_dir = out + "/trainer";
  args.per_device_eval_batch_size = 4;
  args.disable_tqdm = true;
  torch::nn::Linear net(8, n);
  {
    torch::NoGradGuard no_grad;
    net->weight.zero_();
    net->bias.zero_();
    net->bias[0].fill_(1);
  }
  auto ids = torch::arange(n);
  acc::Trainer trainer(net, args, std::nullopt, acc::TensorDataset(torch::randn({n, 8}), ids));
  const auto first = trainer.evaluate();
  std::vector<int64_t> seen;
  trainer.set_compute_metrics([&](const acc::EvalPrediction& p) {
    for (int64_t i = 0; i < p.label_ids.size(0); ++i)
      seen.push_back(p.label_ids[i].item<int64_t>());
    return acc::Metrics{{"custom", 1.5}};
  });
  const auto second = trainer.evaluate();
  if (second.at("eval_custom") != 1.5) fail("a custom metric is reported with the eval_ prefix");
  if (trainer.accelerator().is_main_process()) {
    std::ofstream metric(out + "/metrics.txt");
    metric << first.at("eval_samples") << " " << first.at("eval_accuracy") * n << "\n";
    std::ofstream labels(out + "/labels.txt");
    for (auto id : seen) labels << id << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    auto arg = [&](int i) { return i < argc ? std::string(argv[i]) : std::string("0"); };
    if (mode == "trainer") return trainer(arg(2), std::stoll(arg(3)), std::stoi(arg(4)));
    if (mode == "hand") return hand(arg(2), std::stoll(arg(3)), std::stoi(arg(4)));
    if (mode == "resume") return resume(arg(2), std::stoll(arg(3)));
    if (mode == "metrics") return metrics(arg(2), std::stoll(arg(3)));
    std::cerr << "trainer_worker: unknown mode '" << mode << "'\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "trainer_worker: " << e.what() << std::endl;
    return 1;
  }
}
