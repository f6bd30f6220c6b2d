#pragma once

// BasicNet of the PyTorch DDP tutorials: conv 1->32 3x3, conv 32->64 3x3, max-pool 2,
// dropout 0.25, fc 9216->128, dropout 0.5, fc 128->10, log-softmax. Shared by the Fashion-MNIST
// example and bench/ddp_step, so that the benchmark measures the model the demo trains.

#include <torch/torch.h>

namespace acc::examples {

struct BasicNetImpl : torch::nn::Module {
  BasicNetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(1, 32, 3))),
        conv2(register_module("conv2", torch::nn::Conv2d(32, 64, 3))),
        dropout1(register_module("dropout1", torch::nn::Dropout(0.25))),
        dropout2(register_module("dropout2", torch::nn::Dropout(0.5))),
        fc1(register_module("fc1", torch::nn::Linear(9216, 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(conv1(x));
    x = torch::relu(conv2(x));
    x = dropout1(torch::max_pool2d(x, 2)).flatten(1);
    x = dropout2(torch::relu(fc1(x)));
    return torch::log_softmax(fc2(x), 1);
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Dropout dropout1, dropout2;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(BasicNet);

}  // namespace acc::examples
