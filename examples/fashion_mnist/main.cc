// BasicNet on Fashion-MNIST with libacc: the same program runs as one process (./fashion_mnist)
// or data-parallel under a launcher (acc-launch --nproc_per_node 2 ./fashion_mnist).
//
//   --epochs N           epochs to train (3)
//   --data-dir DIR       the idx files (/usr/share/datasets/fashion-mnist)
//   --checkpoint-dir DIR save_state after every epoch
//   --resume             load_state from --checkpoint-dir first, when a save made it
//   --limit N            train on the first N samples only (quick tests)
//   --global-batch N     samples per optimizer step over all processes (64)

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "acc/common/error.h"
#include "acc/runtime/runtime.h"
#include "basic_net.h"
#include "flags.h"
#include "idx.h"

namespace {

using acc::examples::BasicNet;

struct Args {
  int epochs = 3;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string checkpoint_dir;
  bool resume = false;
  int64_t limit = 0;
  int64_t global_batch = 64;
};

Args parse_args(int argc, char** argv) {
  using acc::examples::whole_number;
  Args args;
  acc::examples::parse_flags(
      argc, argv,
      {{"--epochs", [&](const std::string& v) { args.epochs = whole_number("--epochs", v, 1); }},
       {"--data-dir", [&](const std::string& v) { args.data_dir = v; }},
       {"--checkpoint-dir", [&](const std::string& v) { args.checkpoint_dir = v; }},
       {"--resume", [&](const std::string&) { args.resume = true; }, true},
       {"--limit", [&](const std::string& v) { args.limit = whole_number("--limit", v); }},
       {"--global-batch",
        [&](const std::string& v) { args.global_batch = whole_number("--global-batch", v, 1); }}},
      "main.cc");
  return args;
}

// A one-line bar on the main process; redrawn in place on a terminal, every quarter otherwise.
void progress(const acc::Accelerator& acc, int epoch, size_t done, size_t total, double loss) {
  if (!acc.is_main_process()) return;
  static const bool tty = isatty(STDERR_FILENO) != 0;
  const bool quarter = done == total || done % std::max<size_t>(1, total / 4) == 0;
  if (!tty && !quarter) return;
  if (tty && done % 10 != 0 && done != total) return;
  const int width = 30;
  const int filled = static_cast<int>(width * done / std::max<size_t>(1, total));
  std::fprintf(stderr, "%sepoch %d [%s%s] %zu/%zu loss %.4f%s", tty ? "\r" : "", epoch,
               std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(width - filled), '.').c_str(), done, total, loss,
               tty && done != total ? "" : "\n");
}

double evaluate(acc::Accelerator& acc, BasicNet& model, acc::DataLoader& loader) {
  torch::NoGradGuard no_grad;
  model->eval();
  int64_t correct = 0, seen = 0;
  for (const auto& batch : loader) {
    auto hits = model->forward(batch.data).argmax(1).eq(batch.target);
    auto all = acc.gather_for_metrics(hits);
    correct += all.sum().item<int64_t>();
    seen += all.numel();
  }
  model->train();
  acc.print("  evaluated ", seen, " test samples");
  return 100.0 * static_cast<double>(correct) / static_cast<double>(seen);
}

int run(const Args& args) {
  acc::Accelerator acc;
  acc.set_seed(42);
  const int64_t per_process = args.global_batch / acc.num_processes();
  ACC_CHECK(per_process * acc.num_processes() == args.global_batch, acc::ConfigError,
            "--global-batch ", args.global_batch, " does not divide over ", acc.num_processes(),
            " processes");

  torch::Tensor train_x = fashion_mnist::read_images(args.data_dir, "train");
  torch::Tensor train_y = fashion_mnist::read_labels(args.data_dir, "train");
  if (args.limit > 0) {
    train_x = train_x.slice(0, 0, args.limit);
    train_y = train_y.slice(0, 0, args.limit);
  }
  acc::DataLoaderOptions train_opts;
  train_opts.batch_size = static_cast<size_t>(per_process);
  train_opts.shuffle = true;
  train_opts.seed = 42;
  acc::DataLoader train_loader({train_x, train_y}, train_opts);
  acc::DataLoaderOptions test_opts;
  test_opts.batch_size = 100;
  acc::DataLoader test_loader({fashion_mnist::read_images(args.data_dir, "t10k"),
                               fashion_mnist::read_labels(args.data_dir, "t10k")},
                              test_opts);

  BasicNet net;
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(1e-3));
  auto [model, optimizer, train, test] = acc.prepare(net, adamw, train_loader, test_loader);

  // save_state makes the directory: under acc-launch at the first save, its contents in the
  // node's memory until the launcher writes them (a restart loads from that memory).
  if (args.resume && !args.checkpoint_dir.empty() && std::filesystem::exists(args.checkpoint_dir)) {
    acc.load_state(args.checkpoint_dir);
    acc.print("resumed from ", args.checkpoint_dir, " at epoch ", train.epoch() + 1, " (step ",
              acc.step(), ")");
  }
  acc.print("training BasicNet on ", train.dataset().size(), " samples: ", acc.num_processes(),
            " process(es) x batch ", per_process, ", ", train.size(), " steps per epoch, ",
            torch::get_num_threads(), " thread(s) each");

  double accuracy = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int epoch = static_cast<int>(train.epoch()); epoch < args.epochs; ++epoch) {
    size_t done = 0;
    for (const auto& batch : train) {
      torch::Tensor loss;
      {
        auto autocast = acc.autocast();  // --mixed_precision bf16/fp16; a no-op otherwise
        loss = torch::nll_loss(model->forward(batch.data), batch.target);
      }
      acc.backward(loss);
      optimizer.step();
      optimizer.zero_grad();
      progress(acc, epoch + 1, ++done, train.size(), loss.item<double>());
    }
    accuracy = evaluate(acc, model, test);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    acc.print("epoch ", epoch + 1, ": test accuracy ", accuracy, "% (", seconds, " s)");
    if (!args.checkpoint_dir.empty()) acc.save_state(args.checkpoint_dir);
  }
  acc.print("final test accuracy: ", accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const acc::ConfigError& e) {
    std::cerr << "fashion_mnist: " << e.what() << "\n";
    return 2;
  } catch (const acc::Error& e) {
    std::cerr << "fashion_mnist: " << e.what() << "\n";
    return 1;
  }
}
