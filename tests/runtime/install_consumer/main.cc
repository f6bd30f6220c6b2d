// A user's program built against the installed package alone: acc::launch_all starts two workers
// (Gloo on the CPU), each trains a Linear(4, 1) on its shard of the same eight samples, and the
// caller checks that both ranks end with the same parameters, moved from where they started.
#include <acc/runtime/launch.h>
#include <acc/runtime/runtime.h>

#include <iostream>
#include <vector>

namespace {

torch::nn::Linear seeded_model() {
  torch::manual_seed(0);
  return torch::nn::Linear(4, 1);
}

torch::Tensor flat_parameters(const torch::nn::Linear& net) {
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& p : net->parameters()) parts.push_back(p.detach().flatten());
  return torch::cat(parts);
}

// In a worker: its parameters after training, then the world size and the steps it took.
torch::Tensor train() {
  acc::Accelerator acc;
  torch::nn::Linear net = seeded_model();
  const torch::Tensor x = torch::randn({8, 4});
  const torch::Tensor y = torch::randn({8, 1});
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  acc::DataLoaderOptions options;
  options.batch_size = 2;
  auto [model, opt, loader] = acc.prepare(net, sgd, acc::DataLoader({x, y}, options));
  for (const auto& batch : loader) {
    opt.zero_grad();
    acc.backward(torch::mse_loss(model->forward(batch.data), batch.target));
    opt.step();
  }
  const torch::Tensor counts =
      torch::tensor({static_cast<float>(acc.num_processes()), static_cast<float>(acc.step())});
  return torch::cat({flat_parameters(model), counts});
}

}  // namespace

int main() {
  acc::LaunchOptions options;
  options.num_processes = 2;
  options.env = {{"ACCELERATE_USE_CPU", "1"}};  // Gloo, even where CUDA is present
  const std::vector<torch::Tensor> ranks = acc::launch_all(train, options);
  if (ranks.size() != 2) return 1;
  std::cout << "rank 0: " << ranks[0] << "\nrank 1: " << ranks[1] << std::endl;
  // 8 samples, 2 ranks, batches of 2: 2 steps each.
  const torch::Tensor expected_counts = torch::tensor({2.0F, 2.0F});
  const torch::Tensor start = flat_parameters(seeded_model());
  for (const torch::Tensor& rank : ranks)
    if (!torch::equal(rank.slice(0, -2), expected_counts) ||
        torch::equal(rank.slice(0, 0, -2), start))
      return 1;
  if (!torch::equal(ranks[0], ranks[1])) return 1;
  std::cout << "consumer ok: 2 ranks with equal parameters (C++" << __cplusplus / 100 % 100 << ")"
            << std::endl;
  return 0;
}
