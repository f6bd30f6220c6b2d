// libacc's save_state and load_state for about 150 MB of model and Adam state, in one process:
// into the node's memory as under acc-launch (ACC_CHECKPOINT_MEMORY on /dev/shm), and into a
// directory on storage as without it, beside the floor, the bare copy of every tensor of the
// state (clone). Prints the median of ROUNDS of each, and the ratios.
//
//   save_state_bench [ROUNDS (5)] [STORAGE_DIR (a new directory under $TMPDIR or /tmp)]

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "acc/common/files.h"
#include "acc/runtime/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

double median_ms(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

template <typename F>
double time_ms(int rounds, F&& fn) {
  std::vector<double> ms;
  for (int i = 0; i < rounds; ++i) {
    const auto start = Clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return median_ms(ms);
}

std::string new_dir(const char* base, const std::string& name) {
  std::string pattern = std::string(base) + "/acc-save-state-bench-" + name + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror(pattern.c_str());
    std::exit(1);
  }
  return pattern;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const char* tmp = std::getenv("TMPDIR");
  const std::string storage = argc > 2 ? argv[2] : new_dir(tmp ? tmp : "/tmp", "storage");
  const std::string memory = new_dir("/dev/shm", "memory");
  unsetenv("ACC_CHECKPOINT_MEMORY");

  acc::AcceleratorOptions options;
  options.cpu = true;
  options.env = acc::WorkerEnv{};
  acc::Accelerator acc(options);
  torch::nn::Sequential net(torch::nn::Linear(2048, 2048), torch::nn::ReLU(),
                            torch::nn::Linear(2048, 2048), torch::nn::ReLU(),
                            torch::nn::Linear(2048, 2048));
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3));
  auto [model, opt] = acc.prepare(net, adam);
  acc.backward(model->forward(torch::randn({8, 2048})).sum());
  opt.step();  // Adam's state exists from the first step

  std::vector<torch::Tensor> state;
  for (const auto& p : net->parameters()) state.push_back(p);
  for (const auto& [key, s] : adam.state())
    if (auto* adam_state = dynamic_cast<torch::optim::AdamParamState*>(s.get())) {
      state.push_back(adam_state->exp_avg());
      state.push_back(adam_state->exp_avg_sq());
    }
  double mb = 0;
  for (const auto& t : state) mb += static_cast<double>(t.numel() * t.element_size()) / 1e6;

  std::vector<torch::Tensor> copies;
  const double floor = time_ms(rounds, [&] {
    copies.clear();
    for (const auto& t : state) copies.push_back(t.clone());
  });
  const double to_storage = time_ms(rounds, [&] { acc.save_state(storage + "/ckpt"); });
  const double from_storage = time_ms(rounds, [&] { acc.load_state(storage + "/ckpt"); });
  setenv("ACC_CHECKPOINT_MEMORY", memory.c_str(), 1);
  const double to_memory = time_ms(rounds, [&] { acc.save_state(storage + "/ckpt-memory"); });
  const double from_memory = time_ms(rounds, [&] { acc.load_state(storage + "/ckpt-memory"); });
  unsetenv("ACC_CHECKPOINT_MEMORY");
  acc::remove_tree(memory);
  if (argc <= 2) acc::remove_tree(storage);

  std::printf("state: %.1f MB (3 Linear(2048, 2048) and Adam), median of %d, load average %s", mb,
              rounds, acc::read_file("/proc/loadavg").substr(0, 5).c_str());
  std::printf("\n  floor (clone every tensor)         %8.1f ms\n", floor);
  std::printf("  save_state to memory (acc-launch)  %8.1f ms  %.1fx the floor\n", to_memory,
              to_memory / floor);
  std::printf("  save_state to storage              %8.1f ms  %.1fx the floor\n", to_storage,
              to_storage / floor);
  std::printf("  load_state from memory             %8.1f ms\n", from_memory);
  std::printf("  load_state from storage            %8.1f ms\n", from_storage);
  std::printf("save_state: memory %.1f ms, storage %.1f ms (%.1fx), floor %.1f ms\n", to_memory,
              to_storage, to_storage / to_memory, floor);
  return 0;
}
