// The training function, in a unit that includes acc/runtime/runtime.h alone: the Accelerator,
// the data loader and the error types it throws all come from it.
#include "train.h"

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

}  // namespace

torch::Tensor start_parameters() {
  return flat_parameters(seeded_model());
}

torch::Tensor train(bool plain_backward) {
  acc::Accelerator acc;
  torch::nn::Linear net = seeded_model();
  const torch::Tensor x = torch::randn({8, 4});
  const torch::Tensor y = torch::randn({8, 1});
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  acc::DataLoaderOptions options;
  options.batch_size = 2;
  auto [model, opt, loader] = acc.prepare(net, sgd, acc::DataLoader({x, y}, options));
  try {
    for (const auto& batch : loader) {
      opt.zero_grad();
      const torch::Tensor loss = torch::mse_loss(model->forward(batch.data), batch.target);
      if (plain_backward)
        loss.backward();
      else
        acc.backward(loss);
      opt.step();
    }
  } catch (const acc::ConfigError& e) {
    std::cerr << "consumer: rank " << acc.process_index() << ": acc::ConfigError: " << e.what()
              << std::endl;
    throw;
  }
  const torch::Tensor counts =
      torch::tensor({static_cast<float>(acc.num_processes()), static_cast<float>(acc.step())});
  return torch::cat({flat_parameters(model), counts});
}
