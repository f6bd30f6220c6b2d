// The caller of acc::launch for tests/runtime/launch_test.cc: a program whose main() starts its
// workers with acc::launch, as a user's program does. argv[1] says what the workers do:
//
//   ranks N      every rank joins with an Accelerator and returns "rank R world W local L sum S",
//                S being the all_reduce (sum) of rank + 1; printed by the caller, one line a rank
//   tensor N     every rank returns torch::full({2}, rank) (launch_all); the caller prints them
//   throw N K    rank K throws "boom from rank K"; the others wait at a barrier
//   exit N K     rank K exits with code 7; the others wait at a barrier
//   sleep N      every rank prints "ready R" and sleeps until it is stopped
//   cuda         initialises CUDA in the caller, then launches (exits 77 without a GPU)
//   thread       starts a thread, then launches
//   again N      three calls: every rank returns "first R"; then rank 1 throws (the caller catches
//                the LaunchError and prints it); then every rank returns "third R after F, second
//                failed|returned", F being rank 1's result of the first call as its own main() got
//                it; the caller prints "result: " and each line of the third
//
// Exit status: 0 after printing the results; 3 when acc::launch threw LaunchError (its text on
// stdout); 128+N for InterruptedError(N); 2 for ConfigError (its text on stdout).

#include <torch/cuda.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "acc/common/error.h"
#include "acc/runtime/launch.h"
#include "acc/runtime/runtime.h"

namespace {

void park() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// Three launches in one program: the first returns, the second fails in rank 1 and throws here,
// the third still runs (with what the first returned).
int launch_three_times(const acc::LaunchOptions& options) {
  const std::vector<std::string> first =
      acc::launch_all([] { return "first " + std::string(std::getenv("RANK")); }, options);
  if (!acc::is_launched_worker()) std::cout << "first call returned" << std::endl;
  bool second_failed = false;
  try {
    acc::launch(
        [] {
          if (std::atoi(std::getenv("RANK")) == 1) throw std::runtime_error("second call fails");
        },
        options);
  } catch (const acc::LaunchError& e) {
    if (!acc::is_launched_worker()) std::cout << "second call threw: " << e.what() << std::endl;
    second_failed = true;
  }
  const std::vector<std::string> third = acc::launch_all(
      [&] {
        return "third " + std::string(std::getenv("RANK")) + " after " + first.at(1) +
               (second_failed ? ", second failed" : ", second returned");
      },
      options);
  for (const std::string& line : third) std::cout << "result: " << line << "\n";
  return 0;
}

int run(const std::string& mode, int n, int k) {
  acc::LaunchOptions options;
  options.num_processes = n;
  if (mode == "ranks") {
    auto lines = acc::launch_all(
        [] {
          acc::Accelerator acc;
          auto sum = acc.reduce(torch::tensor({acc.process_index() + 1}, torch::kLong));
          return "rank " + std::to_string(acc.process_index()) + " world " +
                 std::to_string(acc.num_processes()) + " local " +
                 std::to_string(acc.local_process_index()) + " sum " +
                 std::to_string(sum.item<int64_t>());
        },
        options);
    for (const std::string& line : lines) std::cout << "result: " << line << "\n";
    return 0;
  }
  if (mode == "tensor") {
    auto tensors = acc::launch_all(
        [] { return torch::full({2}, std::atoi(std::getenv("RANK")), torch::kFloat); }, options);
    for (const torch::Tensor& t : tensors)
      std::cout << "tensor: " << t[0].item<float>() << " " << t[1].item<float>() << "\n";
    return 0;
  }
  if (mode == "throw" || mode == "exit") {
    acc::launch(
        [&] {
          acc::Accelerator acc;
          if (acc.process_index() == k) {
            std::cerr << "rank " << k << " is about to fail" << std::endl;
            if (mode == "exit") std::_Exit(7);
            throw std::runtime_error("boom from rank " + std::to_string(k));
          }
          acc.wait_for_everyone();
        },
        options);
    return 0;
  }
  if (mode == "sleep") {
    acc::launch(
        [] {
          std::cout << "ready " << std::getenv("RANK") << std::endl;
          park();
        },
        options);
    return 0;
  }
  if (mode == "cuda") {
    if (!torch::cuda::is_available()) return 77;
    torch::Tensor on_gpu = torch::ones({1}, torch::kCUDA);
    acc::launch([] {}, options);
    return 0;
  }
  if (mode == "thread") {
    std::thread sleeper([] { std::this_thread::sleep_for(std::chrono::seconds(2)); });
    sleeper.detach();
    acc::launch([] {}, options);
    return 0;
  }
  if (mode == "again") return launch_three_times(options);
  std::cerr << "unknown mode " << mode << "\n";
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 64;
  const std::string mode = argv[1];
  const int n = argc > 2 ? std::atoi(argv[2]) : 2;
  const int k = argc > 3 ? std::atoi(argv[3]) : 0;
  try {
    return run(mode, n, k);
  } catch (const acc::InterruptedError& e) {
    std::cout << e.what() << std::endl;
    return 128 + e.signal();
  } catch (const acc::LaunchError& e) {
    std::cout << e.what() << std::endl;
    return 3;
  } catch (const acc::ConfigError& e) {
    std::cout << e.what() << std::endl;
    return 2;
  }
}
