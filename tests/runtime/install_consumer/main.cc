// Trains two steps in a world of one against the installed libacc.
#include <acc/runtime/runtime.h>

#include <iostream>

int main() {
  acc::Accelerator acc;
  torch::nn::Linear net(4, 1);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  acc::DataLoaderOptions options;
  options.batch_size = 2;
  auto [model, opt, loader] =
      acc.prepare(net, sgd, acc::DataLoader({torch::randn({4, 4}), torch::randn({4, 1})}, options));
  for (const auto& batch : loader) {
    opt.zero_grad();
    acc.backward(torch::mse_loss(model->forward(batch.data), batch.target));
    opt.step();
  }
  if (acc.step() != 2 || acc.num_processes() != 1) return 1;
  std::cout << "consumer ok (C++" << __cplusplus / 100 % 100 << ")" << std::endl;
  return 0;
}
