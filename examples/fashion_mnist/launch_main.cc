// BasicNet on Fashion-MNIST, launched from main(): started as a plain program, with no launcher
// command, it runs its training function in worker processes with acc::launch, as Accelerate's
// notebook_launcher does, and prints rank 0's test accuracy.
//
//   ./fashion_mnist_launch [--processes N (2)] [--epochs N (1)] [--limit N] [--data-dir DIR]
//
// The workers are this program started again: each runs main() to the acc::launch call, which
// runs the lambda in it (docs/runtime.md, "Launching from main()").

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "acc/common/error.h"
#include "acc/runtime/launch.h"
#include "acc/runtime/runtime.h"
#include "basic_net.h"
#include "flags.h"
#include "idx.h"

namespace {

struct Args {
  int processes = 2;
  int epochs = 1;
  int64_t limit = 0;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
};

Args parse_args(int argc, char** argv) {
  using acc::examples::whole_number;
  Args args;
  acc::examples::parse_flags(
      argc, argv,
      {{"--processes",
        [&](const std::string& v) { args.processes = whole_number("--processes", v, 1); }},
       {"--epochs", [&](const std::string& v) { args.epochs = whole_number("--epochs", v, 1); }},
       {"--limit", [&](const std::string& v) { args.limit = whole_number("--limit", v); }},
       {"--data-dir", [&](const std::string& v) { args.data_dir = v; }}},
      "launch_main.cc");
  return args;
}

// One worker's training: the Accelerator joins the group acc::launch started. Returns the test
// accuracy in percent, the same on every rank (gathered over the whole test set).
double train(const Args& args) {
  acc::Accelerator acc;
  acc.set_seed(42);
  torch::Tensor images = fashion_mnist::read_images(args.data_dir, "train");
  torch::Tensor labels = fashion_mnist::read_labels(args.data_dir, "train");
  if (args.limit > 0) {
    images = images.slice(0, 0, args.limit);
    labels = labels.slice(0, 0, args.limit);
  }
  acc::DataLoaderOptions train_options;
  train_options.batch_size = static_cast<size_t>(64 / acc.num_processes());
  train_options.shuffle = true;
  train_options.seed = 42;
  acc::DataLoader train_loader({images, labels}, train_options);
  acc::DataLoaderOptions test_options;
  test_options.batch_size = 100;
  acc::DataLoader test_loader({fashion_mnist::read_images(args.data_dir, "t10k"),
                               fashion_mnist::read_labels(args.data_dir, "t10k")},
                              test_options);

  acc::examples::BasicNet net;
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(1e-3));
  auto [model, optimizer, train_data, test_data] =
      acc.prepare(net, adamw, train_loader, test_loader);
  for (int epoch = 0; epoch < args.epochs; ++epoch) {
    for (const auto& batch : train_data) {
      acc.backward(torch::nll_loss(model->forward(batch.data), batch.target));
      optimizer.step();
      optimizer.zero_grad();
    }
    acc.print("epoch ", epoch + 1, " done");
  }

  torch::NoGradGuard no_grad;
  model->eval();
  int64_t correct = 0, seen = 0;
  for (const auto& batch : test_data) {
    auto hits = acc.gather_for_metrics(model->forward(batch.data).argmax(1).eq(batch.target));
    correct += hits.sum().item<int64_t>();
    seen += hits.numel();
  }
  return 100.0 * static_cast<double>(correct) / static_cast<double>(seen);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse_args(argc, argv);
    acc::LaunchOptions options;
    options.num_processes = args.processes;
    const auto start = std::chrono::steady_clock::now();
    const double accuracy = acc::launch([&args] { return train(args); }, options);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("test accuracy %.2f%% (%d processes, %d epoch(s), %.1f s)\n", accuracy,
                args.processes, args.epochs, seconds);
    return 0;
  } catch (const acc::InterruptedError& e) {
    std::cerr << "fashion_mnist_launch: " << e.what() << "\n";
    return 128 + e.signal();
  } catch (const acc::Error& e) {
    std::cerr << "fashion_mnist_launch: " << e.what() << "\n";
    return 1;
  }
}
