// The worker programs of the runtime tests, one binary with a mode per test. Started by
// acc-launch (or directly, for a world of one); writes its results under OUT and exits non-zero
// with a message on stderr when a check it can make itself fails.
//
//   runtime_worker ddp OUT STEPS ACCUM [torchdata]  train data-parallel, write params_rank<R>.bin;
//                                             with torchdata from a torch::data dataset, shuffled
//   runtime_worker reference OUT STEPS WORLD ACCUM [torchdata]  one process on the concatenated
//                                             batches
//   runtime_worker collectives                every collective against its expected result
//   runtime_worker metrics OUT N              gather_for_metrics over N samples, and one epoch's
//                                             training indices per rank
//   runtime_worker resume OUT EPOCHS CRASH    train with checkpoints each epoch; with CRASH=1 die
//                                             mid-epoch 2 on restart attempt 0
//   runtime_worker silent STEPS STEP_MS STUCK_RANK STUCK_S
//                                             train STEPS steps STEP_MS apart printing nothing;
//                                             rank STUCK_RANK (-1: none) then sleeps STUCK_S s
//                                             before one more step (the others wait in it)
//   runtime_worker cuda PRECISION             NCCL, collectives and DDP steps on the GPU under
//                                             PRECISION (no, bf16, fp16)
//   runtime_worker throw                      let an exception leave main() (the error file)
//   runtime_worker nccl_env                   join the group, then print NAME=VALUE or NAME unset
//                                             for PyTorch's renamed NCCL variables
//   runtime_worker plain_backward             train with loss.backward() instead of acc.backward
//                                             (the step must refuse it)
//   runtime_worker uneven_backward            rank 0 makes one synchronised backward more than
//                                             the others, which leave the group

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "acc/common/error.h"
#include "acc/runtime/runtime.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "runtime_worker: check failed: " << what << std::endl;
  std::exit(1);
}

void expect(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

struct NetImpl : torch::nn::Module {
  explicit NetImpl(double dropout = 0.0)
      : fc1(register_module("fc1", torch::nn::Linear(8, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 32))),
        fc3(register_module("fc3", torch::nn::Linear(32, 4))),
        drop(register_module("drop", torch::nn::Dropout(dropout))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = drop(torch::tanh(fc1(x)));
    return fc3(torch::tanh(fc2(x)));
  }
  torch::nn::Linear fc1, fc2, fc3;
  torch::nn::Dropout drop;
};
TORCH_MODULE(Net);

// The same synthetic regression data in every process.
acc::TensorDataset make_data(int64_t n) {
  torch::manual_seed(1234);
  auto x = torch::randn({n, 8});
  auto y = torch::randn({n, 4});
  return {x, y};
}

// make_data's samples as a user's torch::data dataset, read one sample at a time.
class RegressionSamples : public torch::data::datasets::Dataset<RegressionSamples> {
 public:
  explicit RegressionSamples(const acc::TensorDataset& tensors)
      : x_(tensors.data()), y_(tensors.targets()) {}
  torch::data::Example<> get(size_t index) override {
    return {x_[static_cast<int64_t>(index)], y_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(x_.size(0)); }

 private:
  torch::Tensor x_, y_;
};

// `n` samples of make_data in batches of `batch_size`: a TensorDataset in order, or with
// `torch_data` a RegressionSamples in a shuffled order, stacked by Stack<> (`stack`) or by the
// loader.
acc::DataLoader make_loader(int64_t n, size_t batch_size, bool torch_data, bool stack) {
  acc::DataLoaderOptions lo;
  lo.batch_size = batch_size;
  if (!torch_data) return {make_data(n), lo};
  lo.shuffle = true;
  lo.seed = 11;
  RegressionSamples samples(make_data(n));
  if (!stack) return {samples, lo};
  return {samples.map(torch::data::transforms::Stack<>()), lo};
}

// Parameters as raw float32 bytes, in registration order: compared bit for bit by the test.
void write_params(const torch::nn::Module& module, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& p : module.parameters()) {
    auto t = p.detach().to(torch::kCPU, torch::kFloat).contiguous();
    out.write(reinterpret_cast<const char*>(t.data_ptr<float>()),
              static_cast<std::streamsize>(t.numel() * sizeof(float)));
  }
}

// Small buckets so the 7 parameter tensors spread over several and the rebuild runs.
acc::AcceleratorOptions small_buckets() {
  acc::AcceleratorOptions options;
  options.first_bucket_cap_bytes = 512;
  options.bucket_cap_bytes = 2048;
  return options;
}

void train(acc::Accelerator& acc, Net& net, acc::DataLoader& loader, int steps) {
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  auto [model, opt, data] = acc.prepare(net, sgd, loader);
  int done = 0;
  while (done < steps) {
    for (const auto& batch : data) {
      // As in Accelerate: zero_grad after step, so accumulated micro-batches survive.
      auto guard = acc.accumulate();
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      acc.backward(loss);
      opt.step();
      opt.zero_grad();
      if (acc.sync_gradients() && ++done == steps) break;
    }
  }
}

int ddp(const std::string& out, int steps, int accum, bool torch_data) {
  auto options = small_buckets();
  options.gradient_accumulation_steps = accum;
  acc::Accelerator acc(options);
  torch::manual_seed(static_cast<uint64_t>(100 + acc.process_index()));  // different inits:
  Net net;  // prepare() must broadcast rank 0's
  auto loader = make_loader(4 * acc.num_processes() * accum * steps, 4, torch_data, true);
  train(acc, net, loader, steps);
  write_params(*net, out + "/params_rank" + std::to_string(acc.process_index()) + ".bin");
  return 0;
}

int reference(const std::string& out, int steps, int world, int accum, bool torch_data) {
  acc::AcceleratorOptions options;
  options.env = acc::WorkerEnv{};
  options.env->use_cpu = acc::worker_env_from_process().use_cpu;  // where the ddp run trained
  acc::Accelerator acc(options);
  torch::manual_seed(100);
  Net net;
  auto loader = make_loader(4 * world * accum * steps, static_cast<size_t>(4 * world * accum),
                            torch_data, false);
  train(acc, net, loader, steps);
  write_params(*net, out + "/params_reference.bin");
  return 0;
}

int collectives() {
  acc::Accelerator acc;
  const int r = acc.process_index();
  const int n = acc.num_processes();
  auto rank_t = torch::tensor({static_cast<float>(r)});

  auto g = acc.gather(torch::full({2, 3}, r, torch::kLong));
  expect(g.sizes() == torch::IntArrayRef({2 * n, 3}), "gather shape");
  for (int i = 0; i < n; ++i) expect(g[2 * i + 1][2].item<int64_t>() == i, "gather order");
  expect(acc.gather(torch::tensor(r == 0)).sum().item<int64_t>() == 1, "gather of a bool scalar");

  const float sum = static_cast<float>(n * (n - 1)) / 2;
  expect(acc.reduce(rank_t).item<float>() == sum, "reduce sum");
  expect(acc.reduce(rank_t, acc::Reduction::kMean).item<float>() == sum / n, "reduce mean");
  expect(acc.reduce(rank_t, acc::Reduction::kMax, 2.0).item<float>() == 2.0f * (n - 1),
         "reduce max scaled");
  expect(rank_t.item<float>() == r, "reduce must not modify its input");

  const int root = n - 1;
  expect(acc.broadcast(rank_t + 7, root).item<float>() == root + 7, "broadcast");
  expect(acc.broadcast_string(r == root ? "from the last" : "x", root) == "from the last",
         "broadcast_string");

  auto padded = acc.pad_across_processes(torch::ones({r + 1, 2}), 0, -1);
  expect(padded.size(0) == n, "pad_across_processes length");
  expect(padded.sum().item<float>() == 2 * (r + 1) - 2 * (n - r - 1), "pad_across_processes fill");
  auto first = acc.pad_across_processes(torch::ones({r + 1}), 0, 0, /*pad_first=*/true);
  expect(first[n - 1].item<float>() == 1 && first.sum().item<float>() == r + 1, "pad_first");

  std::vector<int> items(10);
  for (int i = 0; i < 10; ++i) items[static_cast<size_t>(i)] = i;
  auto mine = acc.split_between_processes(items);
  auto sizes = acc.gather(torch::tensor({static_cast<int64_t>(mine.size())}));
  expect(sizes.sum().item<int64_t>() == 10, "split_between_processes covers every item");
  auto firsts = acc.gather(torch::tensor({static_cast<int64_t>(mine.empty() ? -1 : mine[0])}));
  expect(firsts[0].item<int64_t>() == 0, "split_between_processes starts at 0");
  auto padded_split = acc.split_between_processes(items, true);
  expect(padded_split.size() == static_cast<size_t>((10 + n - 1) / n), "split padding");
  expect(
      acc.split_between_processes(torch::arange(10)).size(0) == static_cast<int64_t>(mine.size()),
      "split_between_processes of a tensor");

  int order = 0;
  acc.main_process_first([&] { order = 1; });
  expect(order == 1, "main_process_first runs the function");
  acc.wait_for_everyone();
  expect(acc.is_main_process() == (r == 0) && acc.is_last_process() == (r == n - 1),
         "process predicates");
  std::cout << "collectives ok rank " << r << " of " << n << std::endl;
  return 0;
}

int metrics(const std::string& out, int64_t n) {
  acc::Accelerator acc;
  acc::DataLoaderOptions lo;
  lo.batch_size = 4;
  lo.shuffle = true;
  lo.seed = 7;
  auto ids = torch::arange(n);
  auto loader = acc.prepare(acc::DataLoader({ids, ids}, lo));
  std::ofstream seen(out + "/train_rank" + std::to_string(acc.process_index()) + ".txt");
  for (const auto& batch : loader)
    for (int64_t i = 0; i < batch.data.size(0); ++i) seen << batch.data[i].item<int64_t>() << "\n";
  std::vector<int64_t> gathered;
  for (const auto& batch : loader) {
    auto all = acc.gather_for_metrics(batch.target);
    for (int64_t i = 0; i < all.size(0); ++i) gathered.push_back(all[i].item<int64_t>());
  }
  if (acc.is_main_process()) {
    std::ofstream metric(out + "/gathered.txt");
    for (auto v : gathered) metric << v << "\n";
  }
  return 0;
}

// bf16 autocast on CPU, and fp16 on CPU refused with a ConfigError.
int mixed_precision() {
  acc::AcceleratorOptions options;
  options.mixed_precision = acc::MixedPrecision::kBf16;
  acc::Accelerator acc(options);
  torch::nn::Linear net(8, 4);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  auto [model, opt] = acc.prepare(net, sgd);
  torch::Tensor out;
  {
    auto autocast = acc.autocast();
    out = model->forward(torch::randn({2, 8}));
  }
  expect(out.scalar_type() == torch::kBFloat16, "bf16 autocast on CPU");
  expect(model->forward(torch::randn({2, 8})).scalar_type() == torch::kFloat,
         "autocast ends with its guard");
  acc.backward(out.to(torch::kFloat).pow(2).mean());
  opt.step();
  expect(model->weight.grad().defined() && model->weight.dtype() == torch::kFloat,
         "fp32 master weights get gradients");
  options.mixed_precision = acc::MixedPrecision::kFp16;
  try {
    acc::Accelerator fp16(options);
    fail("fp16 on CPU must be refused");
  } catch (const acc::ConfigError& e) {
    expect(std::string(e.what()).find("fp16") != std::string::npos, "the error names fp16");
  }
  std::cout << "mixed precision ok" << std::endl;
  return 0;
}

std::vector<torch::Tensor> detached(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> copies;
  for (const auto& t : tensors) copies.push_back(t.detach().clone());
  return copies;
}

bool same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].equal(b[i])) return false;
  return true;
}

// The GPU paths: the NCCL group (joined even by a lone launched process, as in Accelerate), a
// collective on CUDA tensors, DDP steps under autocast with every rank's parameters identical
// afterwards, and with fp16 the gradient scaler skipping an overflowing step.
int cuda(const std::string& precision) {
  acc::AcceleratorOptions options;
  options.mixed_precision = acc::parse_mixed_precision(precision);
  acc::Accelerator acc(options);
  expect(acc.device().is_cuda(), "the device is CUDA");
  expect(acc.backend() == "nccl", "the backend is nccl, not '" + acc.backend() + "'");
  const int n = acc.num_processes();
  auto mine = torch::full({3}, acc.process_index() + 1.0, torch::device(acc.device()));
  auto sum = acc.reduce(mine, acc::Reduction::kSum);
  expect(sum.is_cuda() && sum.eq(n * (n + 1) / 2.0).all().item<bool>(), "reduce over NCCL");

  torch::manual_seed(static_cast<uint64_t>(100 + acc.process_index()));  // prepare broadcasts
  Net net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.05));
  acc::DataLoaderOptions lo;
  lo.batch_size = 16;
  auto [model, opt, loader] = acc.prepare(net, sgd, acc::DataLoader(make_data(16 * n * 40), lo));
  const auto autocast_type = precision == "bf16"   ? torch::kBFloat16
                             : precision == "fp16" ? torch::kHalf
                                                   : torch::kFloat;
  double first_loss = 0;
  double last_loss = 0;
  int steps = 0;
  int skipped = 0;
  torch::Tensor last_input;
  for (const auto& batch : loader) {
    expect(batch.data.is_cuda(), "batches arrive on the GPU");
    torch::Tensor prediction;
    {
      auto autocast = acc.autocast();
      prediction = model->forward(batch.data);
    }
    expect(prediction.scalar_type() == autocast_type,
           "the forward pass runs in " + precision + ", got " +
               std::string(c10::toString(prediction.scalar_type())));
    auto loss = torch::mse_loss(prediction.to(torch::kFloat), batch.target);
    opt.zero_grad();
    acc.backward(loss);
    opt.step();
    skipped += acc.optimizer_step_was_skipped() ? 1 : 0;
    const double mean_loss = acc.reduce(loss.detach(), acc::Reduction::kMean).item<double>();
    if (steps++ == 0) first_loss = mean_loss;
    last_loss = mean_loss;
    last_input = batch.data;
  }
  expect(net->fc1->weight.scalar_type() == torch::kFloat, "master weights stay float32");
  expect(last_loss < first_loss,
         "the loss falls: " + std::to_string(first_loss) + " -> " + std::to_string(last_loss));
  std::vector<torch::Tensor> flat;
  for (const auto& p : net->parameters()) flat.push_back(p.detach().flatten());
  auto all = acc.gather(torch::cat(flat).unsqueeze(0));
  expect((all - all[0]).abs().max().item<float>() == 0.0f, "every rank holds the same parameters");

  if (precision == "fp16") {
    // An overflow: the step is skipped on every rank, the parameters stay and the scale halves.
    const double scale = acc.loss_scale();
    const auto before = detached(net->parameters());
    opt.zero_grad();
    acc.backward(model->forward(last_input).sum() * std::numeric_limits<float>::infinity());
    opt.step();
    expect(acc.optimizer_step_was_skipped(), "an overflowing fp16 step is skipped");
    expect(same(before, net->parameters()), "a skipped step leaves the parameters");
    expect(acc.loss_scale() == scale / 2, "the loss scale halves after an overflow");
  }
  acc.print("cuda ", precision, " ok: ", n, " rank(s) over ", acc.backend(), " on ",
            static_cast<int>(torch::cuda::device_count()), " GPU(s), ", steps, " steps (", skipped,
            " skipped), loss ", first_loss, " -> ", last_loss, ", scale ", acc.loss_scale());
  return 0;
}

int resume(const std::string& out, int epochs, bool crash) {
  acc::Accelerator acc;
  auto dataset = make_data(4 * acc.num_processes() * 6);
  acc.set_seed(5, /*device_specific=*/true);  // each rank drops out differently
  Net net(0.3);                               // dropout: the RNG state must come back too
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(1e-2));
  acc::DataLoaderOptions lo;
  lo.batch_size = 4;
  lo.shuffle = true;
  auto [model, opt, loader] = acc.prepare(net, adamw, acc::DataLoader(dataset, lo));
  const std::string ckpt = out + "/ckpt";
  if (std::filesystem::exists(ckpt)) acc.load_state(ckpt);
  const bool first_attempt = acc.env().restart_count == 0;
  for (auto epoch = static_cast<int>(loader.epoch()); epoch < epochs; ++epoch) {
    int step = 0;
    for (const auto& batch : loader) {
      opt.zero_grad();
      acc.backward(torch::mse_loss(model->forward(batch.data), batch.target));
      opt.step();
      if (crash && first_attempt && epoch == 2 && ++step == 3) {
        std::cerr << "runtime_worker: crashing on purpose" << std::endl;
        std::_Exit(3);
      }
    }
    acc.save_state(ckpt);
  }
  write_params(*net, out + "/params_rank" + std::to_string(acc.process_index()) + ".bin");
  std::ofstream(out + "/steps_rank" + std::to_string(acc.process_index()) + ".txt")
      << acc.step() << "\n";
  return 0;
}

// For the stall watch: beats (one per optimizer step) but no output; then, on one rank, a hang.
int silent(int steps, int step_ms, int stuck_rank, int stuck_s) {
  acc::Accelerator acc;
  Net net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.01));
  auto [model, opt] = acc.prepare(net, sgd);
  auto step = [&] {
    auto loss = torch::mse_loss(model->forward(torch::randn({4, 8})), torch::randn({4, 4}));
    acc.backward(loss);
    opt.step();
    opt.zero_grad();
  };
  for (int i = 0; i < steps; ++i) {
    step();
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  }
  if (acc.process_index() == stuck_rank) std::this_thread::sleep_for(std::chrono::seconds(stuck_s));
  if (stuck_rank >= 0) step();
  return 0;
}

// The misuse the Accelerator cannot let through silently: each rank would step on its own
// gradients. Exits 0 only if the steps were taken.
int plain_backward() {
  acc::Accelerator acc;
  torch::manual_seed(static_cast<uint64_t>(acc.process_index()));
  Net net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  acc::DataLoaderOptions lo;
  lo.batch_size = 4;
  auto [model, opt, loader] =
      acc.prepare(net, sgd, acc::DataLoader(make_data(8 * acc.num_processes()), lo));
  for (const auto& batch : loader) {
    torch::mse_loss(model->forward(batch.data), batch.target).backward();
    opt.step();
    opt.zero_grad();
  }
  std::cout << "plain_backward: rank " << acc.process_index() << " stepped " << acc.step()
            << " times" << std::endl;
  return 0;
}

// Rank 0 makes a 4th backward (its own extra batch) after the others made 3 and left.
int uneven_backward() {
  acc::Accelerator acc;
  Net net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  auto [model, opt] = acc.prepare(net, sgd);
  const int steps = acc.process_index() == 0 ? 4 : 3;
  for (int i = 0; i < steps; ++i) {
    acc.backward(torch::mse_loss(model->forward(torch::ones({4, 8})), torch::zeros({4, 4})));
    opt.step();
    opt.zero_grad();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // An exception that leaves main(): libacc's terminate handler writes the error file.
  if (argc > 1 && std::string(argv[1]) == "throw") {
    acc::Accelerator acc;
    throw std::runtime_error("rank " + std::to_string(acc.process_index()) +
                             " cannot open /data/shard-7.bin");
  }
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    auto arg = [&](int i) { return i < argc ? std::string(argv[i]) : std::string("0"); };
    if (mode == "ddp")
      return ddp(arg(2), std::stoi(arg(3)), std::stoi(arg(4)), arg(5) == "torchdata");
    if (mode == "reference")
      return reference(arg(2), std::stoi(arg(3)), std::stoi(arg(4)), std::stoi(arg(5)),
                       arg(6) == "torchdata");
    if (mode == "collectives") return collectives();
    if (mode == "metrics") return metrics(arg(2), std::stoll(arg(3)));
    if (mode == "mixed_precision") return mixed_precision();
    if (mode == "resume") return resume(arg(2), std::stoi(arg(3)), arg(4) == "1");
    if (mode == "cuda") return cuda(arg(2));
    if (mode == "nccl_env") {
      acc::Accelerator acc;
      acc.wait_for_everyone();
      for (const char* name : {"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                               "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE"}) {
        const char* value = std::getenv(name);
        std::cout << "rank " << acc.process_index() << " " << name
                  << (value ? std::string("=") + value : std::string(" unset")) << std::endl;
      }
      return 0;
    }
    if (mode == "plain_backward") return plain_backward();
    if (mode == "uneven_backward") return uneven_backward();
    if (mode == "silent")
      return silent(std::stoi(arg(2)), std::stoi(arg(3)), std::stoi(arg(4)), std::stoi(arg(5)));
    std::cerr << "runtime_worker: unknown mode '" << mode << "'\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "runtime_worker: " << e.what() << std::endl;
    return 1;
  }
}
