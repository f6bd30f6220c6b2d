// A user's program built against the installed package alone: acc::launch_all starts two workers
// (Gloo on the CPU), each trains a Linear(4, 1) on its shard of the same eight samples (train.cc),
// and the caller checks that both ranks end with the same parameters, moved from where they
// started. `consumer --plain-backward` makes the workers call loss.backward() instead of
// acc.backward(loss): libacc refuses the first step, and the program exits 1 with the report.
// `consumer --processes 1`: one worker, which needs no process group (a PyTorch wheel's LibTorch
// has no Gloo: scripts/torch2-runtime-test.sh).
#include <acc/runtime/launch.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include "train.h"

int main(int argc, char** argv) {
  // The workers run main() again with the same arguments, so they see the flags too.
  bool plain_backward = false;
  int processes = 2;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--plain-backward") == 0) plain_backward = true;
    if (std::strcmp(argv[i], "--processes") == 0 && i + 1 < argc) processes = std::atoi(argv[++i]);
  }
  if (processes < 1 || processes > 8) return 2;
  acc::LaunchOptions options;
  options.num_processes = processes;
  options.env = {{"ACCELERATE_USE_CPU", "1"}};  // Gloo, even where CUDA is present
  std::vector<torch::Tensor> ranks;
  try {
    ranks = acc::launch_all([&] { return train(plain_backward); }, options);
  } catch (const acc::LaunchError& e) {
    std::cerr << "consumer: " << e.what() << std::endl;
    return 1;
  }
  if (ranks.size() != static_cast<size_t>(processes)) return 1;
  for (size_t r = 0; r < ranks.size(); ++r) std::cout << "rank " << r << ": " << ranks[r] << "\n";
  // 8 samples, batches of 2 per rank: 8 / (2 * processes) steps each (2 ranks: 2; 1 rank: 4).
  const torch::Tensor expected_counts =
      torch::tensor({static_cast<float>(processes), static_cast<float>(8 / (2 * processes))});
  const torch::Tensor start = start_parameters();
  for (const torch::Tensor& rank : ranks)
    if (!torch::equal(rank.slice(0, -2), expected_counts) ||
        torch::equal(rank.slice(0, 0, -2), start))
      return 1;
  for (const torch::Tensor& rank : ranks)
    if (!torch::equal(rank, ranks[0])) return 1;
  std::cout << "consumer ok: " << processes << (processes == 1 ? " rank" : " ranks")
            << " with equal parameters (C++" << __cplusplus / 100 % 100 << ")" << std::endl;
  return 0;
}
