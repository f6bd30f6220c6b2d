#include "acc/runtime/accelerator.h"

#include <torch/version.h>

#if ACC_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <optional>
#include <thread>
#include <type_traits>

#include "acc/common/error.h"
#include "accelerator_impl.h"
#include "error_file.h"
#include "heap_retention.h"
#include "log.h"
#include "shm_allreduce.h"
#include "torch_names.h"

namespace acc {
namespace {

// PyTorch's names of dtypes ("float32"), as the Python hook writes them in the progress file.
const char* dtype_name(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat:
      return "float32";
    case torch::kDouble:
      return "float64";
    case torch::kHalf:
      return "float16";
    case torch::kBFloat16:
      return "bfloat16";
    case torch::kLong:
      return "int64";
    case torch::kInt:
      return "int32";
    case torch::kShort:
      return "int16";
    case torch::kChar:
      return "int8";
    case torch::kByte:
      return "uint8";
    case torch::kBool:
      return "bool";
    default:
      return "other";
  }
}

// Runs one collective of the default group. c10d reports failures as c10::Error or
// std::runtime_error; users get acc::BackendError naming `what`. And,
// under acc-launch, it is a record in the worker's progress file (acc/common/progress_file.h)
// from start to end, so the hang report can name it and a completed one counts as progress
// (`op` null: no record).
template <typename Impl, typename F>
auto run_collective(Impl& impl, const char* what, const char* op, const torch::Tensor* tensor,
                    int world_size, F&& fn) {
  std::optional<std::uint64_t> slot;
  if (impl.progress && op)
    slot = impl.progress->begin(
        "default", ++impl.collectives, op, tensor ? static_cast<std::uint64_t>(tensor->numel()) : 0,
        tensor ? dtype_name(tensor->scalar_type()) : "", world_size, -1, "");
  auto end = [&] {
    if (slot) impl.progress->end(*slot);
  };
  try {
    if constexpr (std::is_void_v<decltype(fn())>) {
      fn();
      end();
    } else {
      auto result = fn();
      end();
      return result;
    }
  } catch (const acc::Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw BackendError(detail::concat(what, " failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw BackendError(detail::concat(what, " failed: ", e.what()));
  }
}

// Where a rank that leaves the group leaves its count of synchronised backward calls (in the
// store, under the attempt's prefix): a rank whose gradient synchronisation then fails can tell
// that the ranks made different numbers of them.
std::string backward_count_key(int rank) {
  return "acc_synchronised_backwards/" + std::to_string(rank);
}

// Gloo has no bool type: such tensors travel as bytes.
torch::Tensor to_wire(const torch::Tensor& tensor) {
  return tensor.scalar_type() == torch::kBool ? tensor.to(torch::kUInt8) : tensor;
}

}  // namespace

MixedPrecision parse_mixed_precision(const std::string& value) {
  if (value == "no" || value.empty()) return MixedPrecision::kNo;
  if (value == "fp16") return MixedPrecision::kFp16;
  if (value == "bf16") return MixedPrecision::kBf16;
  throw ConfigError(detail::concat("mixed precision '", value,
                                   "' is not one of no, fp16, bf16 (ACCELERATE_MIXED_PRECISION)"));
}

Accelerator::Accelerator(AcceleratorOptions options)
    : env_(options.env ? *options.env : worker_env_from_process()),
      options_(std::move(options)),
      gradient_state_(std::make_shared<GradientState>()),
      impl_(std::make_unique<Impl>()) {
  impl_->logger = runtime::detail::make_logger(env_.rank, env_.world_size);
  // An exception that ends the worker lands in the launcher's failure report (error_file.h).
  runtime::detail::install_terminate_handler();
  // Before the model and its first step allocate: see heap_retention.h.
  runtime::detail::retain_freed_heap_memory();
  if (options_.apply_omp_num_threads) {
    // OMP_NUM_THREADS wins (launchers set it per worker); otherwise the local processes share
    // the cores. OpenMP's own default can be 1 in containers, which wastes a lone process's cores.
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    const int threads = env_.omp_num_threads > 0 ? env_.omp_num_threads
                                                 : std::max(1, cores / env_.local_world_size);
    torch::set_num_threads(threads);
  }

  const bool cpu = options_.cpu || env_.use_cpu || !torch::cuda::is_available();
  if (!cpu) {
#if ACC_WITH_CUDA
    const auto count = static_cast<int>(torch::cuda::device_count());
    device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env_.local_rank % count));
    c10::cuda::set_device(device_.index());
#endif
  }
  mixed_precision_ = options_.mixed_precision ? *options_.mixed_precision
                                              : parse_mixed_precision(env_.mixed_precision);
  ACC_CHECK(!(mixed_precision_ == MixedPrecision::kFp16 && device_.is_cpu()), ConfigError,
            "fp16 mixed precision needs a CUDA device; on CPU use bf16 or no "
            "(ACCELERATE_MIXED_PRECISION / --mixed_precision)");
  if (mixed_precision_ == MixedPrecision::kFp16) {
    impl_->scaler = true;
    impl_->scale = torch::full({1}, 65536.0, torch::TensorOptions().device(device_));
    impl_->growth_tracker =
        torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt).device(device_));
    impl_->found_inf = torch::zeros({1}, torch::TensorOptions().device(device_));
  }
  gradient_accumulation_steps_ = options_.gradient_accumulation_steps > 0
                                     ? options_.gradient_accumulation_steps
                                     : std::max(1, env_.gradient_accumulation_steps);

  if (env_.world_size > 1 || (env_.launched && device_.is_cuda())) {
    backend_ = device_.is_cuda() ? "nccl" : "gloo";
    // Only the names of PyTorch's variables this LibTorch reads: no warning on every rank.
    runtime::detail::drop_names_libtorch_ignores();
    impl_->group = runtime::detail::join_group(env_, device_.is_cuda(), options_.timeout);
    impl_->beat = std::make_unique<runtime::detail::ProgressBeat>(impl_->group.store, env_.rank);
    impl_->progress = progress_file::Writer::from_environment();
    runtime::detail::log(
        *impl_->logger, runtime::detail::LogLevel::kDebug,
        detail::concat("joined ", env_.world_size, " processes through ", env_.master_addr, ":",
                       env_.master_port, " (", backend_, ")"));
  }
}

Accelerator::~Accelerator() {
  // Unwound by an exception, this worker is about to fail: the group stays open until the process
  // ends, as a Python worker's does. Closed now, it would fail the other ranks' collectives at
  // once, and whichever of them exited first would be reported as the root cause instead of this
  // rank. Left to the process's end on purpose (a program that catches and goes on keeps it).
  if (std::uncaught_exceptions() > 0 && impl_->group.group) {
    new runtime::detail::GroupHandle(std::move(impl_->group));
    return;
  }
  try {
    end_training();
  } catch (const std::exception& e) {
    log_warning(detail::concat("leaving the process group: ", e.what()));
  }
}

void Accelerator::end_training() {
  // Before the group closes (the ranks still in a backward then fail): see
  // uneven_backwards(). Best effort; the store is the process group's own.
  if (impl_->group.store && impl_->group.group) {
    try {
      const std::string count = std::to_string(impl_->synced_backwards);
      impl_->group.store->set(backward_count_key(process_index()),
                              std::vector<uint8_t>(count.begin(), count.end()));
    } catch (const std::exception&) {
    }
  }
  impl_->data_parallel.clear();
  if (impl_->group.shutdown) impl_->group.shutdown();
  impl_->group = {};
}

// ---- prepare ----

void Accelerator::prepare_module(std::shared_ptr<torch::nn::Module> module) {
  ACC_CHECK(module != nullptr, ConfigError, "prepare: the model is null");
  // A second Reducer over the same parameters would average their gradients twice over.
  ACC_CHECK(std::find(impl_->models.begin(), impl_->models.end(), module) == impl_->models.end(),
            ConfigError,
            "prepare: this model was prepared already; prepare each model once and keep using "
            "it (prepare returns the same module)");
  module->to(device_);
  impl_->models.push_back(module);
  // to() keeps each parameter's TensorImpl (it sets the data): the optimizer's tensors are these.
  for (const auto& p : module->parameters())
    impl_->model_parameters.insert(p.unsafeGetTensorImpl());
  if (!use_distributed()) return;
  ACC_CHECK(impl_->group.group, BackendError, "prepare after end_training()");
  runtime::detail::DataParallelOptions dp{
      options_.first_bucket_cap_bytes, options_.bucket_cap_bytes, options_.find_unused_parameters,
      options_.broadcast_buffers, nullptr};
  if (runtime::detail::ShmAllreduce::applies(num_processes(), env_.local_world_size,
                                             device_.is_cpu()))
    dp.shm = runtime::detail::ShmAllreduce::open(
        *impl_->group.store, "acc_shm_allreduce/" + std::to_string(impl_->models.size()),
        process_index(), num_processes(), options_.timeout);
  run_collective(
      *impl_, "broadcasting the model from rank 0", "broadcast", nullptr, num_processes(), [&] {
        impl_->data_parallel.push_back(
            std::make_unique<runtime::detail::DataParallel>(module, impl_->group.group, dp));
      });
}

AcceleratedOptimizer Accelerator::prepare(torch::optim::Optimizer& optimizer) {
  ACC_CHECK(impl_->backwards_at_step.count(&optimizer) == 0, ConfigError,
            "prepare: this optimizer was prepared already; prepare each optimizer once and step "
            "the AcceleratedOptimizer prepare returned");
  ACC_CHECK(!impl_->models.empty(), ConfigError,
            "prepare: the optimizer was prepared before its model; prepare the model first, "
            "as acc.prepare(model, optimizer) in that order (the model's parameters move to the "
            "device and get their gradients averaged before the optimizer refers to them)");
  size_t index = 0;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      ACC_CHECK(impl_->model_parameters.count(p.unsafeGetTensorImpl()) != 0, ConfigError,
                "prepare: parameter ", index, " of the optimizer (shape ", p.sizes(),
                ") belongs to no prepared model, so its gradient would not be averaged over the "
                "processes; prepare every model the optimizer trains before the optimizer, as "
                "acc.prepare(model, optimizer) in that order");
      ++index;
    }
  }
  impl_->optimizers.push_back(&optimizer);
  // Counted from here: a backward before prepare serves the first step too.
  impl_->backwards_at_step[&optimizer] = {};
  return AcceleratedOptimizer(optimizer, *this);
}

DataLoader Accelerator::prepare(DataLoader loader) {
  loader.shard(process_index(), num_processes(), options_.even_batches, device_, gradient_state_);
  impl_->loader_epochs.push_back(loader.epoch_counter());
  return loader;
}

// ---- training ----

void Accelerator::backward(const torch::Tensor& loss) {
  ACC_CHECK(!impl_->models.empty(), ConfigError,
            "acc.backward(loss) before prepare: prepare the model first, as auto [model, "
            "optimizer] = acc.prepare(net, optimizer), so that its gradients are averaged over "
            "the processes");
  torch::Tensor scaled = loss;
  if (gradient_accumulation_steps_ > 1) scaled = scaled / gradient_accumulation_steps_;
  if (impl_->scaler) scaled = scaled * impl_->scale.to(scaled.scalar_type());
  // Not a record of its own (op null): it is mostly the backward pass, whose time would read as
  // time spent waiting in a collective; the optimizer step's beat is its progress.
  try {
    run_collective(*impl_, "synchronising gradients", nullptr, nullptr, num_processes(), [&] {
      for (auto& dp : impl_->data_parallel) dp->before_backward(scaled, reducer_sync_);
      scaled.backward();
    });
  } catch (const BackendError& e) {
    throw BackendError(detail::concat(e.what(), uneven_backwards()));
  }
  ++(reducer_sync_ ? impl_->synced_backwards : impl_->local_backwards);
}

SyncGuard Accelerator::accumulate() {
  if (gradient_state_->end_of_dataloader) {
    accumulation_counter_ = 0;
    sync_gradients_ = true;
  } else {
    ++accumulation_counter_;
    sync_gradients_ = accumulation_counter_ % gradient_accumulation_steps_ == 0;
  }
  SyncGuard guard(this, reducer_sync_);
  reducer_sync_ = reducer_sync_ && sync_gradients_;
  return guard;
}

SyncGuard Accelerator::no_sync() {
  SyncGuard guard(this, reducer_sync_);
  reducer_sync_ = false;
  return guard;
}

SyncGuard::SyncGuard(Accelerator* accelerator, bool previous)
    : accelerator_(accelerator), previous_(previous) {}
SyncGuard::SyncGuard(SyncGuard&& other) noexcept
    : accelerator_(other.accelerator_), previous_(other.previous_) {
  other.accelerator_ = nullptr;
}
SyncGuard::~SyncGuard() {
  if (accelerator_ != nullptr) accelerator_->set_reducer_sync(previous_);
}

void Accelerator::unscale_gradients(torch::optim::Optimizer* optimizer) {
  if (!impl_->scaler || impl_->unscaled) return;
  std::vector<torch::Tensor> grads;
  auto collect = [&](torch::optim::Optimizer& opt) {
    for (auto& group : opt.param_groups())
      for (auto& p : group.params())
        if (p.grad().defined()) grads.push_back(p.grad());
  };
  if (optimizer != nullptr) {
    collect(*optimizer);
  } else {
    for (auto* opt : impl_->optimizers) collect(*opt);
  }
  impl_->found_inf.zero_();
  auto inv_scale = impl_->scale.to(torch::kDouble).reciprocal().to(torch::kFloat);
  at::_amp_foreach_non_finite_check_and_unscale_(grads, impl_->found_inf, inv_scale);
  impl_->unscaled = true;
}

// Cheap on the right path (two counters compared); only a step with no synchronised backward
// since its last one looks at the gradients themselves.
void Accelerator::check_gradients_for_step(torch::optim::Optimizer& optimizer) {
  const auto found = impl_->backwards_at_step.find(&optimizer);
  ACC_CHECK(found != impl_->backwards_at_step.end(), ConfigError,
            "optimizer step of an optimizer that prepare did not return; prepare the model, then "
            "the optimizer, as acc.prepare(model, optimizer), and step the optimizer it returns");
  Impl::BackwardsAtStep& last = found->second;
  if (impl_->synced_backwards == last.synced) {
    ACC_CHECK(impl_->local_backwards == last.local, ConfigError,
              "optimizer step after acc.backward(loss) under no_sync() only: the gradients are "
              "this process's own, not averaged over the processes; run the backward of the "
              "last micro-batch before a step outside no_sync(), or use acc.accumulate()");
    // With LibTorch 1.x zero_grad() leaves zeros, with 2.x none: a step after zero_grad() and
    // no backward at all changes nothing and is let through.
    bool gradients = false;
    for (const auto& group : optimizer.param_groups())
      for (const auto& p : group.params())
        gradients = gradients || (p.grad().defined() && p.grad().ne(0).any().item<bool>());
    ACC_CHECK(!gradients, ConfigError,
              "optimizer step on gradients that acc.backward(loss) did not compute (none since "
              "this optimizer's last step): a plain loss.backward() leaves each process its own "
              "gradients, not averaged over the processes, and the ranks drift apart; call "
              "acc.backward(loss) instead of loss.backward()");
  }
  last = {impl_->synced_backwards, impl_->local_backwards};
}

void Accelerator::optimizer_step(torch::optim::Optimizer& optimizer) {
  check_gradients_for_step(optimizer);
  if (impl_->scaler) {
    unscale_gradients(&optimizer);
    // The gradients were averaged over the ranks already, so found_inf agrees everywhere.
    step_was_skipped_ = impl_->found_inf.item<float>() != 0.0f;
    if (!step_was_skipped_) optimizer.step();
    at::_amp_update_scale_(impl_->scale, impl_->growth_tracker, impl_->found_inf, 2.0, 0.5, 2000);
    impl_->unscaled = false;
  } else {
    optimizer.step();
  }
  ++step_;
  if (impl_->beat) impl_->beat->step();
  if (impl_->progress) impl_->progress->beat();
}

double Accelerator::loss_scale() const {
  return impl_->scaler ? impl_->scale.item<double>() : 1.0;
}

void AcceleratedOptimizer::step() {
  if (accelerator_->sync_gradients()) accelerator_->optimizer_step(*optimizer_);
}

void AcceleratedOptimizer::zero_grad() {
  if (accelerator_->sync_gradients()) optimizer_->zero_grad();
}

double Accelerator::clip_grad_norm_(const std::vector<torch::Tensor>& parameters, double max_norm,
                                    double norm_type) {
  unscale_gradients(nullptr);
  return torch::nn::utils::clip_grad_norm_(parameters, max_norm, norm_type);
}

void Accelerator::clip_grad_value_(const std::vector<torch::Tensor>& parameters,
                                   double clip_value) {
  unscale_gradients(nullptr);
  torch::nn::utils::clip_grad_value_(parameters, clip_value);
}

std::unique_ptr<AutocastGuard> Accelerator::autocast() const {
  return std::make_unique<AutocastGuard>(mixed_precision_, device_);
}

AutocastGuard::AutocastGuard(MixedPrecision precision, torch::Device device) {
  if (precision == MixedPrecision::kNo) return;
  active_ = true;
  cuda_ = device.is_cuda();
  const auto dtype = precision == MixedPrecision::kBf16 ? at::kBFloat16 : at::kHalf;
  const auto type = cuda_ ? at::kCUDA : at::kCPU;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  previous_enabled_ = at::autocast::is_autocast_enabled(type);
  previous_dtype_ = at::autocast::get_autocast_dtype(type);
  at::autocast::set_autocast_enabled(type, true);
  at::autocast::set_autocast_dtype(type, dtype);
#else
  if (type == at::kCUDA) {
    previous_enabled_ = at::autocast::is_enabled();
    previous_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    previous_enabled_ = at::autocast::is_cpu_enabled();
    previous_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  const auto type = cuda_ ? at::kCUDA : at::kCPU;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  at::autocast::set_autocast_enabled(type, previous_enabled_);
  at::autocast::set_autocast_dtype(type, previous_dtype_);
#else
  if (type == at::kCUDA) {
    at::autocast::set_enabled(previous_enabled_);
    at::autocast::set_autocast_gpu_dtype(previous_dtype_);
  } else {
    at::autocast::set_cpu_enabled(previous_enabled_);
    at::autocast::set_autocast_cpu_dtype(previous_dtype_);
  }
#endif
}

// ---- collectives ----

torch::Tensor Accelerator::gather(const torch::Tensor& tensor) {
  torch::Tensor input = tensor.dim() == 0 ? tensor.reshape({1}) : tensor;
  if (!use_distributed()) return input;
  const auto dtype = input.scalar_type();
  input = to_wire(input).contiguous();
  return run_collective(*impl_, "gather", "all_gather", &input, num_processes(), [&] {
    std::vector<std::vector<torch::Tensor>> outputs(1);
    for (int i = 0; i < num_processes(); ++i) outputs[0].push_back(torch::empty_like(input));
    std::vector<torch::Tensor> inputs{input};
    impl_->group.group->allgather(outputs, inputs)->wait();
    return torch::cat(outputs[0], 0).to(dtype);
  });
}

torch::Tensor Accelerator::gather_for_metrics(const torch::Tensor& tensor) {
  torch::Tensor all = gather(tensor);
  if (gradient_state_->end_of_dataloader && gradient_state_->remainder > 0)
    return all.slice(0, 0, static_cast<int64_t>(gradient_state_->remainder));
  return all;
}

torch::Tensor Accelerator::reduce(const torch::Tensor& tensor, Reduction reduction, double scale) {
  torch::Tensor out = tensor.clone().contiguous();
  if (use_distributed()) {
    run_collective(*impl_, "reduce", "all_reduce", &out, num_processes(), [&] {
      std::vector<torch::Tensor> tensors{out};
      c10d::AllreduceOptions opts;
      opts.reduceOp = reduction == Reduction::kMax ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
      impl_->group.group->allreduce(tensors, opts)->wait();
    });
    if (reduction == Reduction::kMean) out = out / num_processes();
  }
  if (scale != 1.0) out = out * scale;
  return out;
}

torch::Tensor Accelerator::broadcast(const torch::Tensor& tensor, int from_process) {
  ACC_CHECK(from_process >= 0 && from_process < num_processes(), ConfigError,
            "broadcast: from_process ", from_process, " is not a rank of ", num_processes());
  torch::Tensor out = to_wire(tensor).clone().contiguous();
  if (!use_distributed()) return out.to(tensor.scalar_type());
  run_collective(*impl_, "broadcast", "broadcast", &out, num_processes(), [&] {
    std::vector<torch::Tensor> tensors{out};
    c10d::BroadcastOptions opts;
    opts.rootRank = from_process;
    impl_->group.group->broadcast(tensors, opts)->wait();
  });
  return out.to(tensor.scalar_type());
}

std::string Accelerator::broadcast_string(const std::string& value, int from_process) {
  if (!use_distributed()) return value;
  // On the device: NCCL has no CPU backend. The bytes are filled and read on the CPU.
  auto length = broadcast(torch::full({1}, static_cast<int64_t>(value.size()),
                                      torch::TensorOptions(torch::kLong).device(device_)),
                          from_process);
  auto bytes = torch::zeros({length.item<int64_t>()}, torch::kUInt8);
  if (process_index() == from_process)
    std::copy(value.begin(), value.end(), bytes.data_ptr<uint8_t>());
  bytes = broadcast(bytes.to(device_), from_process).cpu();
  const auto* data = bytes.data_ptr<uint8_t>();
  return std::string(data, data + bytes.numel());
}

torch::Tensor Accelerator::pad_across_processes(const torch::Tensor& tensor, int64_t dim,
                                                double pad_index, bool pad_first) {
  if (!use_distributed() || tensor.dim() == 0) return tensor;
  const int64_t d = dim < 0 ? dim + tensor.dim() : dim;
  ACC_CHECK(d >= 0 && d < tensor.dim(), ConfigError, "pad_across_processes: dim ", dim,
            " is out of range for a tensor of ", tensor.dim(), " dimensions");
  auto sizes =
      gather(torch::full({1}, tensor.size(d), torch::TensorOptions(torch::kLong).device(device_)));
  const int64_t longest = sizes.max().item<int64_t>();
  if (longest == tensor.size(d)) return tensor;
  auto shape = tensor.sizes().vec();
  shape[static_cast<size_t>(d)] = longest;
  auto out = torch::full(shape, pad_index, tensor.options());
  const int64_t start = pad_first ? longest - tensor.size(d) : 0;
  out.narrow(d, start, tensor.size(d)).copy_(tensor);
  return out;
}

void Accelerator::wait_for_everyone() {
  if (!use_distributed()) return;
  run_collective(*impl_, "wait_for_everyone", "barrier", nullptr, num_processes(),
                 [&] { impl_->group.group->barrier()->wait(); });
}

// A failed gradient synchronisation most often means a peer is gone: when peers left the group
// after another number of synchronised backward calls than this rank is making, says so (Gloo
// itself only says "Connection reset by peer"). Reads the store only on this failure path.
std::string Accelerator::uneven_backwards() const {
  if (!reducer_sync_ || !impl_->group.store) return "";
  const std::uint64_t mine = impl_->synced_backwards + 1;
  std::string others;
  int named = 0;
  try {
    for (int rank = 0; rank < num_processes() && named < 4; ++rank) {
      const std::string key = backward_count_key(rank);
      if (rank == process_index() || !impl_->group.store->check({key})) continue;
      const std::vector<uint8_t> bytes = impl_->group.store->get(key);
      const std::string count(bytes.begin(), bytes.end());
      if (count == std::to_string(mine)) continue;
      others += detail::concat(named == 0 ? "rank " : ", rank ", rank,
                               named == 0 ? " left the group after " : " after ", count);
      ++named;
    }
  } catch (const std::exception&) {
  }
  if (others.empty()) return "";
  return detail::concat(
      "; the ranks made different numbers of synchronised backward calls: this rank (",
      process_index(), ") failed in call ", mine, " and ", others,
      ". Every rank must call acc.backward(loss) as many times: as many batches on each (a "
      "prepared loader with even_batches gives that), and no backward only some ranks make");
}

std::pair<size_t, size_t> Accelerator::split_range(size_t length) const {
  const auto n = static_cast<size_t>(num_processes());
  const auto i = static_cast<size_t>(process_index());
  const size_t q = length / n;
  const size_t r = length % n;
  const size_t begin = i * q + std::min(i, r);
  return {begin, begin + q + (i < r ? 1 : 0)};
}

torch::Tensor Accelerator::split_between_processes(const torch::Tensor& tensor) const {
  auto [begin, end] = split_range(static_cast<size_t>(tensor.size(0)));
  return tensor.slice(0, static_cast<int64_t>(begin), static_cast<int64_t>(end));
}

// ---- output and seeds ----

void Accelerator::log_debug(const std::string& message, bool main_process_only) const {
  if (main_process_only && !is_main_process()) return;
  runtime::detail::log(*impl_->logger, runtime::detail::LogLevel::kDebug, message);
}

void Accelerator::log_info(const std::string& message, bool main_process_only) const {
  if (main_process_only && !is_main_process()) return;
  runtime::detail::log(*impl_->logger, runtime::detail::LogLevel::kInfo, message);
}

void Accelerator::log_warning(const std::string& message, bool main_process_only) const {
  if (main_process_only && !is_main_process()) return;
  runtime::detail::log(*impl_->logger, runtime::detail::LogLevel::kWarn, message);
}

void Accelerator::set_seed(uint64_t seed, bool device_specific) const {
  torch::manual_seed(seed + (device_specific ? static_cast<uint64_t>(process_index()) : 0));
}

}  // namespace acc
