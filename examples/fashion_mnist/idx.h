#pragma once

// Reading the MNIST/Fashion-MNIST idx files (plain or gzipped) into tensors.

#include <torch/torch.h>

#include <string>

namespace fashion_mnist {

// Images as float [N, 1, 28, 28] normalised with Fashion-MNIST's mean and std, labels as int64
// [N]. `split` is "train" or "t10k"; `dir` holds <split>-images-idx3-ubyte[.gz] and
// <split>-labels-idx1-ubyte[.gz]. Throws acc::ConfigError when a file is missing or malformed.
torch::Tensor read_images(const std::string& dir, const std::string& split);
torch::Tensor read_labels(const std::string& dir, const std::string& split);

}  // namespace fashion_mnist
