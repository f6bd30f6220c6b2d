// One DDP training step of BasicNet (Fashion-MNIST shapes) through libacc, timed per step.
// Prints, on rank 0, one line: "ddp_step impl=cpp steps=N median_ms=X wait_ms=Y", where wait is
// the median time from the last gradient computed in backward to backward() returning (the
// all-reduce not hidden behind the backward pass).
//
//   ddp_step --steps 60 --warmup 10 --batch 32

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
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

}  // namespace

int main(int argc, char** argv) {
  int steps = 60, warmup = 10;
  int64_t batch = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--steps") steps = std::stoi(argv[i + 1]);
    if (flag == "--warmup") warmup = std::stoi(argv[i + 1]);
    if (flag == "--batch") batch = std::stoll(argv[i + 1]);
  }
  acc::Accelerator acc;
  torch::manual_seed(0);
  BasicNet net;
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(1e-3));
  auto [model, opt] = acc.prepare(net, adamw);
  auto x = torch::randn({batch, 1, 28, 28}).to(acc.device());
  auto y = torch::randint(0, 10, {batch}).to(acc.device());
  // On a GPU the step's kernels run asynchronously: its time ends when they have finished.
  auto finish = [&] {
    if (acc.device().is_cuda()) torch::cuda::synchronize();
  };

  // The moment the last parameter gradient of this backward was computed.
  std::atomic<int64_t> last_grad_ns{0};
  for (auto& p : model->parameters()) {
    p.register_hook([&last_grad_ns](torch::Tensor grad) {
      const int64_t now = Clock::now().time_since_epoch().count();
      int64_t seen = last_grad_ns.load();
      while (now > seen && !last_grad_ns.compare_exchange_weak(seen, now)) {
      }
      return grad;
    });
  }

  std::vector<double> step_ms, wait_ms;
  for (int i = 0; i < warmup + steps; ++i) {
    acc.wait_for_everyone();  // steps start together, so a rank's wait is not its peer's lag
    const auto start = Clock::now();
    auto loss = torch::nll_loss(model->forward(x), y);
    last_grad_ns = 0;
    acc.backward(loss);
    const auto backward_end = Clock::now();
    opt.step();
    opt.zero_grad();
    finish();
    const auto end = Clock::now();
    if (i < warmup) continue;
    step_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    const auto last = Clock::time_point(Clock::duration(last_grad_ns.load()));
    wait_ms.push_back(std::chrono::duration<double, std::milli>(backward_end - last).count());
  }
  auto medians = acc.gather(
      torch::tensor({median(step_ms), median(wait_ms)}, torch::kDouble).to(acc.device()));
  if (acc.is_main_process()) {
    // The slowest rank sets the pace.
    auto per_rank = medians.reshape({-1, 2});
    std::printf("ddp_step impl=cpp steps=%d median_ms=%.2f wait_ms=%.2f\n", steps,
                per_rank.select(1, 0).max().item<double>(),
                per_rank.select(1, 1).max().item<double>());
  }
  return 0;
}
