// One DDP training step of BasicNet (Fashion-MNIST shapes) through libacc, timed per step.
// Prints, on rank 0, one line:
//   "ddp_step impl=cpp steps=N median_ms=X forward_ms=F backward_ms=B wait_ms=W optimizer_ms=O"
// X is the median step; F, B, W, O are the medians of its phases: forward and loss, backward
// until the last parameter gradient is computed, the wait from there to backward() returning
// (the all-reduce not hidden behind the backward pass), optimizer step and zero_grad. All from
// the rank whose median step is the slowest (it sets the pace). ddp_step.py prints the same.
// With --floor, impl=floor: each process trains a model of its own with the same step and no
// all-reduce (no prepare, a plain backward), the physical floor of a DDP step on these cores.
//
//   ddp_step --steps 60 --warmup 10 --batch 32 [--floor]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "acc/runtime/runtime.h"
#include "basic_net.h"

namespace {

using Clock = std::chrono::steady_clock;

using acc::examples::BasicNet;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Each parameter's gradient hook keeps in `last_grad_ns` the latest moment one was computed.
void record_last_gradient(BasicNet& model, std::atomic<int64_t>& last_grad_ns) {
  for (auto& p : model->parameters()) {
    p.register_hook([&last_grad_ns](torch::Tensor grad) {
      const int64_t now = Clock::now().time_since_epoch().count();
      int64_t seen = last_grad_ns.load();
      while (now > seen && !last_grad_ns.compare_exchange_weak(seen, now)) {
      }
      return grad;
    });
  }
}

// On rank 0, the line of the rank whose median step is the slowest: the medians of each phase.
void print_slowest_rank(acc::Accelerator& acc, const std::vector<std::vector<double>>& phase_ms,
                        const char* impl, int steps) {
  std::vector<double> medians;
  for (const auto& samples : phase_ms) medians.push_back(median(samples));
  auto all = acc.gather(torch::tensor(medians, torch::kDouble).to(acc.device()));
  if (!acc.is_main_process()) return;
  auto per_rank = all.cpu().reshape({-1, static_cast<int64_t>(medians.size())});
  auto slowest = per_rank[per_rank.select(1, 0).argmax().item<int64_t>()];
  auto at = [&](int64_t p) { return slowest[p].item<double>(); };
  std::printf(
      "ddp_step impl=%s steps=%d median_ms=%.2f forward_ms=%.2f backward_ms=%.2f wait_ms=%.2f "
      "optimizer_ms=%.2f\n",
      impl, steps, at(0), at(1), at(2), at(3), at(4));
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 60, warmup = 10;
  int64_t batch = 32;
  bool floor = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--floor") floor = true;
    if (i + 1 == argc) break;
    if (flag == "--steps") steps = std::stoi(argv[i + 1]);
    if (flag == "--warmup") warmup = std::stoi(argv[i + 1]);
    if (flag == "--batch") batch = std::stoll(argv[i + 1]);
  }
  acc::Accelerator acc;
  torch::manual_seed(0);
  BasicNet model;
  model->to(acc.device());  // prepare would; the floor is not prepared
  torch::optim::AdamW adamw(model->parameters(), torch::optim::AdamWOptions(1e-3));
  // The prepared optimizer, for the DDP step; the floor steps the process's own one.
  std::optional<acc::AcceleratedOptimizer> prepared;
  if (!floor) prepared.emplace(std::get<1>(acc.prepare(model, adamw)));
  auto x = torch::randn({batch, 1, 28, 28}).to(acc.device());
  auto y = torch::randint(0, 10, {batch}).to(acc.device());
  // On a GPU the step's kernels run asynchronously: its time ends when they have finished.
  auto finish = [&] {
    if (acc.device().is_cuda()) torch::cuda::synchronize();
  };

  // The moment the last parameter gradient of this backward was computed.
  std::atomic<int64_t> last_grad_ns{0};
  record_last_gradient(model, last_grad_ns);

  auto ms = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
  };
  // Per phase, in the order of the printed line: step, forward, backward, wait, optimizer.
  std::vector<std::vector<double>> phase_ms(5);
  for (int i = 0; i < warmup + steps; ++i) {
    acc.wait_for_everyone();  // steps start together, so a rank's wait is not its peer's lag
    const auto start = Clock::now();
    auto loss = torch::nll_loss(model->forward(x), y);
    const auto forward_end = Clock::now();
    last_grad_ns = 0;
    if (prepared) {
      acc.backward(loss);
    } else {
      loss.backward();
    }
    const auto backward_end = Clock::now();
    if (prepared) {
      prepared->step();
      prepared->zero_grad();
    } else {
      adamw.step();
      adamw.zero_grad();
    }
    finish();
    const auto end = Clock::now();
    if (i < warmup) continue;
    const auto last = Clock::time_point(Clock::duration(last_grad_ns.load()));
    const double phases[] = {ms(start, end), ms(start, forward_end), ms(forward_end, last),
                             ms(last, backward_end), ms(backward_end, end)};
    for (size_t p = 0; p < phase_ms.size(); ++p) phase_ms[p].push_back(phases[p]);
  }
  print_slowest_rank(acc, phase_ms, floor ? "floor" : "cpp", steps);
  return 0;
}
