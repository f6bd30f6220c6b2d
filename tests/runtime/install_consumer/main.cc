// A user's program built against the installed package alone: acc::launch_all starts two workers
// (Gloo on the CPU), each trains a Linear(4, 1) on its shard of the same eight samples (train.cc),
// and the caller checks that both ranks end with the same parameters, moved from where they
// started. `consumer --plain-backward` makes the workers call loss.backward() instead of
// acc.backward(loss): libacc refuses the first step, and the program exits 1 with the report.
#include <acc/runtime/launch.h>

#include <cstring>
#include <iostream>
#include <vector>

#include "train.h"

int main(int argc, char** argv) {
  // The workers run main() again with the same arguments, so they see the flag too.
  const bool plain_backward = argc > 1 && std::strcmp(argv[1], "--plain-backward") == 0;
  acc::LaunchOptions options;
  options.num_processes = 2;
  options.env = {{"ACCELERATE_USE_CPU", "1"}};  // Gloo, even where CUDA is present
  std::vector<torch::Tensor> ranks;
  try {
    ranks = acc::launch_all([&] { return train(plain_backward); }, options);
  } catch (const acc::LaunchError& e) {
    std::cerr << "consumer: " << e.what() << std::endl;
    return 1;
  }
  if (ranks.size() != 2) return 1;
  std::cout << "rank 0: " << ranks[0] << "\nrank 1: " << ranks[1] << std::endl;
  // 8 samples, 2 ranks, batches of 2: 2 steps each.
  const torch::Tensor expected_counts = torch::tensor({2.0F, 2.0F});
  const torch::Tensor start = start_parameters();
  for (const torch::Tensor& rank : ranks)
    if (!torch::equal(rank.slice(0, -2), expected_counts) ||
        torch::equal(rank.slice(0, 0, -2), start))
      return 1;
  if (!torch::equal(ranks[0], ranks[1])) return 1;
  std::cout << "consumer ok: 2 ranks with equal parameters (C++" << __cplusplus / 100 % 100 << ")"
            << std::endl;
  return 0;
}
