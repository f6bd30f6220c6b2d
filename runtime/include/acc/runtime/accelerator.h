#pragma once

// acc::Accelerator: joins the worker group a launcher started (acc-launch, torchrun, MPI, SLURM),
// wraps a LibTorch training loop for data-parallel training and offers the collectives and
// checkpoints of HuggingFace Accelerate under the same names. A single-process loop changes in
// four places (docs/runtime.md):
//
//   acc::Accelerator acc;                                        // joins the process group
//   auto [model, opt, loader] = acc.prepare(net, optimizer, train_loader);
//   acc.backward(loss);                                          // replaces loss.backward()
//   acc.print("accuracy ", acc.gather_for_metrics(correct).sum().item<int64_t>());
//
// Thread-safety: an Accelerator is used from the thread that runs the training loop. Collectives
// block until every rank has called them (up to the timeout) and must be called by all ranks in
// the same order. Errors (acc/common/error.h, included by acc/runtime/runtime.h):
// acc::ConfigError for a bad option or environment variable and for a misuse that would
// otherwise train wrongly without a word (a plain loss.backward() before an optimizer step, a
// step or backward before prepare, prepare twice or out of order, load_state of another
// model's checkpoint), acc::BackendError when the process group cannot be created or a
// collective fails, acc::TimeoutError when joining takes longer than the timeout.

#include <torch/torch.h>

#include <ATen/autocast_mode.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "acc/runtime/data_loader.h"
#include "acc/runtime/worker_env.h"

namespace acc {

namespace detail {
// Whether Accelerator::prepare has an overload for T (see the catch-all one).
template <typename T>
inline constexpr bool kPreparable =
    std::is_base_of_v<torch::detail::ModuleHolderIndicator, std::decay_t<T>> ||
    std::is_convertible_v<T, std::shared_ptr<torch::nn::Module>> ||
    std::is_base_of_v<torch::optim::Optimizer, std::decay_t<T>> ||
    std::is_convertible_v<T, DataLoader>;
}  // namespace detail

enum class MixedPrecision { kNo, kFp16, kBf16 };

// Parses "no", "fp16", "bf16" (ACCELERATE_MIXED_PRECISION's values). Throws acc::ConfigError.
MixedPrecision parse_mixed_precision(const std::string& value);

enum class Reduction { kSum, kMean, kMax };

struct AcceleratorOptions {
  // Unset: ACCELERATE_MIXED_PRECISION, else no.
  std::optional<MixedPrecision> mixed_precision;
  // 0: ACCELERATE_GRADIENT_ACCUMULATION_STEPS, else 1.
  int gradient_accumulation_steps = 0;
  // Stay on the CPU even when CUDA is available (also ACCELERATE_USE_CPU).
  bool cpu = false;
  // How long joining and each collective may take before acc::TimeoutError / BackendError.
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  // Gradient buckets, as PyTorch's DDP: the first small so communication starts early.
  size_t first_bucket_cap_bytes = size_t{1} << 20;
  size_t bucket_cap_bytes = size_t{25} << 20;
  // DDP's find_unused_parameters: needed when some parameters get no gradient in a step.
  bool find_unused_parameters = false;
  // Copy rank 0's buffers (BatchNorm statistics) to every rank at each synchronised backward.
  bool broadcast_buffers = true;
  // Accelerate's DataLoaderConfiguration.even_batches.
  bool even_batches = true;
  // The worker environment; unset reads this process's environment.
  std::optional<WorkerEnv> env;
  // Sets torch's intra-op threads to OMP_NUM_THREADS, or when that is unset to the cores
  // divided by the local processes.
  bool apply_omp_num_threads = true;
};

class Accelerator;

// The optimizer as Accelerate's AcceleratedOptimizer: step() and zero_grad() do nothing while
// gradients are being accumulated (sync_gradients() is false); with fp16 step() unscales and
// skips steps whose gradients overflowed. Refers to the optimizer and the Accelerator, which
// must outlive it. Get it from Accelerator::prepare. Not thread-safe.
class AcceleratedOptimizer {
 public:
  AcceleratedOptimizer(torch::optim::Optimizer& optimizer, Accelerator& accelerator)
      : optimizer_(&optimizer), accelerator_(&accelerator) {}

  // Throws acc::ConfigError, before stepping, when the optimizer was not prepared, or when it
  // holds gradients that no synchronised Accelerator::backward computed since its last step: a
  // plain loss.backward() (each rank would step on its own gradients), or backward() under
  // no_sync() only. Checked in a world of one too, where the same program would still train,
  // so that it does not break only once it runs on two processes.
  void step();
  void zero_grad();
  torch::optim::Optimizer& optimizer() const { return *optimizer_; }
  torch::optim::Optimizer* operator->() const { return optimizer_; }

 private:
  torch::optim::Optimizer* optimizer_;
  Accelerator* accelerator_;
};

// Enables autocast (bf16 on CPU, fp16/bf16 on CUDA) for its lifetime; a no-op without mixed
// precision. Not movable; nests.
class AutocastGuard {
 public:
  AutocastGuard(MixedPrecision precision, torch::Device device);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  bool cuda_ = false;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

// Marks a scope in which gradients are not synchronised (accumulate() or no_sync()); restores
// the previous state when it ends. Movable, not copyable.
class SyncGuard {
 public:
  SyncGuard(Accelerator* accelerator, bool previous);
  SyncGuard(SyncGuard&& other) noexcept;
  SyncGuard(const SyncGuard&) = delete;
  SyncGuard& operator=(const SyncGuard&) = delete;
  SyncGuard& operator=(SyncGuard&&) = delete;
  ~SyncGuard();

 private:
  Accelerator* accelerator_;
  bool previous_;
};

class Accelerator {
 public:
  // Reads the environment and, when more than one process takes part, connects to the store at
  // MASTER_ADDR:MASTER_PORT (hosting it on rank 0 unless TORCHELASTIC_USE_AGENT_STORE=True) and
  // creates the process group (Gloo on CPU, NCCL on CUDA). Blocks until every rank has joined
  // or the timeout passes. Outside a launcher it is a world of one and touches no network.
  explicit Accelerator(AcceleratorOptions options = AcceleratorOptions());
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  // ---- who am I ----
  int process_index() const { return env_.rank; }
  int local_process_index() const { return env_.local_rank; }
  int num_processes() const { return env_.world_size; }
  bool is_main_process() const { return env_.rank == 0; }
  bool is_local_main_process() const { return env_.local_rank == 0; }
  bool is_last_process() const { return env_.rank == env_.world_size - 1; }
  // True when the process takes part in a process group: more than one process, or (as in
  // Accelerate) a launched process on CUDA, which joins NCCL even alone.
  bool use_distributed() const { return !backend_.empty(); }
  // The process group's backend: "nccl", "gloo", or "" when there is none.
  const std::string& backend() const { return backend_; }
  torch::Device device() const { return device_; }
  MixedPrecision mixed_precision() const { return mixed_precision_; }
  const WorkerEnv& env() const { return env_; }

  // ---- prepare ----
  // A model: parameters and buffers are moved to device() and broadcast from rank 0 (blocks);
  // from now on backward() averages its gradients over the ranks in buckets while the backward
  // pass runs (c10d::Reducer, as PyTorch's DDP). Returns the same module. Throws
  // acc::ConfigError when the model is null or was prepared already.
  template <typename Holder,
            typename = std::enable_if_t<
                std::is_base_of<torch::detail::ModuleHolderIndicator, std::decay_t<Holder>>::value>>
  std::decay_t<Holder> prepare(Holder&& model) {
    prepare_module(model.ptr());
    return std::forward<Holder>(model);
  }
  std::shared_ptr<torch::nn::Module> prepare(std::shared_ptr<torch::nn::Module> model) {
    prepare_module(model);
    return model;
  }
  // An optimizer: see AcceleratedOptimizer. Prepare the model first (its parameters must be on
  // device() before the optimizer's state is created): throws acc::ConfigError when one of the
  // optimizer's parameters belongs to no prepared model (its gradient would never be averaged),
  // or when the optimizer was prepared already.
  AcceleratedOptimizer prepare(torch::optim::Optimizer& optimizer);
  // A data loader: returns a copy that reads this rank's shard onto device().
  DataLoader prepare(DataLoader loader);
  // Anything else does not compile, with a sentence saying what prepare takes (a torch::data
  // dataset goes into an acc::DataLoader, which gives it a batch size and a shuffle).
  template <typename T, typename = std::enable_if_t<!detail::kPreparable<T>>>
  DataLoader prepare(T&&) {
    static_assert(!detail::kIsTorchDataLoader<T>,
                  "prepare() cannot shard torch::data::make_data_loader's loader: its dataset and "
                  "sampler are private to it. Give the dataset to an acc::DataLoader instead: "
                  "acc.prepare(acc::DataLoader(dataset, {batch_size, shuffle}))");
    static_assert(!detail::kIsTorchDataset<T>,
                  "prepare() takes a torch::data dataset inside an acc::DataLoader, which gives it "
                  "a batch size and a shuffle: acc.prepare(acc::DataLoader(dataset, {batch_size, "
                  "shuffle}))");
    static_assert(detail::kIsTorchDataLoader<T> || detail::kIsTorchDataset<T>,
                  "prepare() takes a model (a ModuleHolder or std::shared_ptr<torch::nn::Module>), "
                  "an optimizer (an lvalue torch::optim::Optimizer) or an acc::DataLoader");
    std::abort();  // never compiled: one of the assertions fails for every T
  }
  // Several objects at once, returned in the same order (for structured bindings).
  template <typename A, typename B, typename... Rest>
  auto prepare(A&& a, B&& b, Rest&&... rest) {
    using Result =
        std::tuple<decltype(prepare(std::forward<A>(a))), decltype(prepare(std::forward<B>(b))),
                   decltype(prepare(std::forward<Rest>(rest)))...>;
    // Braced initialisation evaluates left to right, so models come before optimizers.
    return Result{prepare(std::forward<A>(a)), prepare(std::forward<B>(b)),
                  prepare(std::forward<Rest>(rest))...};
  }
  // The module the user wrote (prepare() does not wrap it, so this is the identity).
  template <typename M>
  M unwrap_model(M model) const {
    return model;
  }

  // ---- training ----
  // Replaces loss.backward(): divides by the accumulation steps, scales for fp16, and when
  // gradients are synchronised in this step arms the reducers so each bucket is all-reduced
  // as soon as its gradients are ready. Blocks until the averaged gradients are in .grad().
  // Throws acc::ConfigError when no model was prepared.
  void backward(const torch::Tensor& loss);
  // Unscales fp16 gradients, then torch::nn::utils::clip_grad_norm_. Returns the total norm.
  double clip_grad_norm_(const std::vector<torch::Tensor>& parameters, double max_norm,
                         double norm_type = 2.0);
  void clip_grad_value_(const std::vector<torch::Tensor>& parameters, double clip_value);
  // Gradient accumulation for one step: counts steps and synchronises every
  // gradient_accumulation_steps()-th one and at the end of the data loader; the other steps
  // run as no_sync(). Keep the returned guard alive for the forward and backward.
  [[nodiscard]] SyncGuard accumulate();
  // Gradients are not synchronised while the guard lives (DDP's no_sync).
  [[nodiscard]] SyncGuard no_sync();
  bool sync_gradients() const { return sync_gradients_; }
  int gradient_accumulation_steps() const { return gradient_accumulation_steps_; }
  // Autocast for the mixed precision in use; wrap the forward pass.
  [[nodiscard]] std::unique_ptr<AutocastGuard> autocast() const;
  // Optimizer steps taken (AcceleratedOptimizer::step that ran), saved by save_state.
  int64_t step() const { return step_; }
  // fp16: whether the last optimizer step was skipped because its gradients overflowed.
  bool optimizer_step_was_skipped() const { return step_was_skipped_; }
  // fp16: the gradient scaler's current loss scale (GradScaler.get_scale()); 1 otherwise.
  double loss_scale() const;

  // ---- collectives (blocking; every rank must call them) ----
  // All ranks' tensors concatenated along dim 0 (a scalar counts as one row). Shapes must
  // agree except along dim 0... and along dim 0 too: use pad_across_processes first otherwise.
  torch::Tensor gather(const torch::Tensor& tensor);
  // gather(), then at the end of a prepared data loader drops the rows that even_batches
  // repeated, so a metric counts each sample of the dataset exactly once.
  torch::Tensor gather_for_metrics(const torch::Tensor& tensor);
  // A reduced copy (sum, mean or max over ranks) times `scale`.
  torch::Tensor reduce(const torch::Tensor& tensor, Reduction reduction = Reduction::kSum,
                       double scale = 1.0);
  // Rank `from_process`'s tensor on every rank (same shape and dtype everywhere).
  torch::Tensor broadcast(const torch::Tensor& tensor, int from_process = 0);
  // Rank `from_process`'s string on every rank.
  std::string broadcast_string(const std::string& value, int from_process = 0);
  // Pads `tensor` along `dim` with `pad_index` to the largest size over the ranks.
  torch::Tensor pad_across_processes(const torch::Tensor& tensor, int64_t dim = 0,
                                     double pad_index = 0, bool pad_first = false);
  // A barrier.
  void wait_for_everyone();
  // Runs `fn` on the main process first, then on the others (downloads, caches).
  template <typename F>
  void main_process_first(F&& fn) {
    if (!is_main_process()) wait_for_everyone();
    std::forward<F>(fn)();
    if (is_main_process()) wait_for_everyone();
  }
  // This rank's contiguous share of `items`: the first len % n ranks get one more; with
  // apply_padding every rank gets the same count, repeating the last item.
  template <typename T>
  std::vector<T> split_between_processes(const std::vector<T>& items,
                                         bool apply_padding = false) const {
    auto [begin, end] = split_range(items.size());
    std::vector<T> mine(items.begin() + static_cast<std::ptrdiff_t>(begin),
                        items.begin() + static_cast<std::ptrdiff_t>(end));
    const size_t most = (items.size() + static_cast<size_t>(num_processes()) - 1) /
                        static_cast<size_t>(num_processes());
    while (apply_padding && !items.empty() && mine.size() < most) mine.push_back(items.back());
    return mine;
  }
  torch::Tensor split_between_processes(const torch::Tensor& tensor) const;

  // ---- output (Accelerate's accelerator.print and get_logger) ----
  // Writes the arguments and a newline to stdout on the local main process only.
  template <typename... Args>
  void print(Args&&... args) const {
    if (!is_local_main_process()) return;
    std::ostringstream out;
    (out << ... << std::forward<Args>(args));
    out << '\n';
    std::cout << out.str() << std::flush;
  }
  // A line on stderr, "[12:00:01.234] [rank 1/2] [info] message", as libacc's own lines, when
  // its level is at least ACC_LOG_LEVEL (trace, debug, info, warning, error, critical, off; info
  // when unset). With main_process_only only the main process writes it (as Accelerate's
  // get_logger does by default; a warning comes from every process unless asked). Thread-safe.
  void log_debug(const std::string& message, bool main_process_only = true) const;
  void log_info(const std::string& message, bool main_process_only = true) const;
  void log_warning(const std::string& message, bool main_process_only = false) const;

  // ---- reproducibility and checkpoints ----
  // Seeds torch's generators (CPU and CUDA) with seed, plus process_index() when device_specific.
  void set_seed(uint64_t seed, bool device_specific = false) const;
  // Saves the prepared models (model.pt, model_1.pt, ...), optimizers (optimizer.pt, ...), the
  // fp16 scaler, every rank's RNG states (CPU and its CUDA device; random_states_<rank>.pt), step()
  // and the loaders' epochs into `dir`. The checkpoint appears at `dir` atomically: it is written
  // into a sibling temporary directory and renamed by the main process. Blocks (two barriers).
  // Under acc-launch (ACC_CHECKPOINT_MEMORY) the save goes to the node's memory instead, which
  // outlives a restart, and the launcher writes it to `dir` in the background, when an attempt
  // fails and at the job's end (docs/checkpoints.md); where that memory has no room, to `dir`.
  void save_state(const std::string& dir);
  // Restores what save_state wrote (prepare everything first, in the same order). A resumed run
  // continues bit for bit. Under acc-launch, the newest save of `dir` that every rank has in its
  // node's memory comes first; else `dir`. Throws acc::ConfigError when `dir` is not a complete
  // checkpoint, when
  // it holds another number of models or optimizers than were prepared (none prepared yet: it
  // was called before prepare), or when a model's file holds other parameters than the model
  // (another model's checkpoint, or models prepared in another order): the message names the
  // file and the missing and unexpected names.
  void load_state(const std::string& dir);

  // Leaves the process group (also done by the destructor). Collectives fail afterwards.
  void end_training();

 private:
  friend class AcceleratedOptimizer;
  friend class SyncGuard;
  friend class Trainer;  // its checkpoints hold its own trainer_state.pt beside the state
  struct Impl;

  void prepare_module(std::shared_ptr<torch::nn::Module> module);
  std::pair<size_t, size_t> split_range(size_t length) const;
  void set_reducer_sync(bool sync) { reducer_sync_ = sync; }
  void optimizer_step(torch::optim::Optimizer& optimizer);
  void check_gradients_for_step(torch::optim::Optimizer& optimizer);
  std::string uneven_backwards() const;
  void unscale_gradients(torch::optim::Optimizer* optimizer);
  // save_state/load_state's parts (checkpoint.cc). A checkpoint's own files (the Trainer's
  // trainer_state.pt) are written by `files(into)` beside the state, into the directory being
  // committed, by each process that writes the replicated parts.
  using CheckpointFiles = std::function<void(const std::string& into)>;
  // save_state, with `files`. Under acc-launch `dir` is not made (save_state makes it for a
  // restart's exists(dir)): saved_for_in_memory() finds the saves.
  void save_checkpoint(const std::string& dir, const CheckpointFiles& files);
  // load_state; returns the directory it read (`dir`, `dir.old` or a save in memory), where the
  // checkpoint's own files are.
  std::string load_checkpoint(const std::string& dir);
  // The directories this rank's node holds a save of in its memory, for this rank.
  std::vector<std::string> saved_for_in_memory() const;
  // Under acc-launch: the saves go to the node's memory (ACC_CHECKPOINT_MEMORY).
  bool saves_in_memory() const;
  // Each of `values`' maximum over the ranks (one all-reduce). Collective.
  std::vector<int64_t> max_over_ranks(const std::vector<int64_t>& values);
  void save_state_to_storage(const std::string& dir, const CheckpointFiles& files);
  void write_state(const std::string& into, bool replicated_parts);
  void read_state(const std::string& from);
  std::string checkpoint_in(const std::string& dir);
  bool save_state_in_memory(const std::string& memory, const std::string& dir,
                            const CheckpointFiles& files);
  std::string saved_in_memory(const std::string& memory, const std::string& dir);

  WorkerEnv env_;
  AcceleratorOptions options_;
  torch::Device device_ = torch::kCPU;
  MixedPrecision mixed_precision_ = MixedPrecision::kNo;
  std::string backend_;
  bool step_was_skipped_ = false;
  int gradient_accumulation_steps_ = 1;
  int64_t accumulation_counter_ = 0;
  bool sync_gradients_ = true;
  bool reducer_sync_ = true;
  int64_t step_ = 0;
  std::shared_ptr<GradientState> gradient_state_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace acc
