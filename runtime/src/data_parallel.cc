#include "data_parallel.h"

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <type_traits>
#include <unordered_map>

#include "shm_allreduce.h"

namespace acc::runtime::detail {
namespace {

// PyTorch's DDP broadcasts module states in 250 MiB chunks.
constexpr size_t kBroadcastBucketBytes = size_t{250} << 20;

// c10d::Reducer's constructor differs between LibTorch versions; this picks the form the one
// compiled against has (a template, so that only the chosen call is compiled).
template <typename Reducer = c10d::Reducer>
std::shared_ptr<Reducer> make_reducer(std::vector<torch::Tensor> params,
                                      std::vector<std::vector<size_t>> buckets,
                                      std::vector<size_t> limits,
                                      c10::intrusive_ptr<c10d::ProcessGroup> group,
                                      std::vector<bool> expect_sparse,
                                      std::unordered_map<size_t, std::string> names,
                                      const DataParallelOptions& options) {
  const auto cap = static_cast<int64_t>(options.bucket_cap_bytes);
  const auto first_cap = static_cast<int64_t>(options.first_bucket_cap_bytes);
  constexpr bool kHasSizeLimits =
      std::is_constructible_v<Reducer, std::vector<torch::Tensor>, std::vector<std::vector<size_t>>,
                              std::vector<size_t>, c10::intrusive_ptr<c10d::ProcessGroup>,
                              std::vector<bool>, int64_t, bool, bool,
                              std::unordered_map<size_t, std::string>, int64_t>;
  if constexpr (kHasSizeLimits) {
    // LibTorch 1.13 to 2.x: each bucket's size limit follows the indices.
    return std::make_shared<Reducer>(
        std::move(params), std::move(buckets), std::move(limits), std::move(group),
        std::move(expect_sparse), cap, options.find_unused_parameters,
        /*gradient_as_bucket_view=*/false, std::move(names), first_cap);
  } else {
    // LibTorch 2.11: no limits argument (an empty bucket_bytes_cap_list keeps cap and first_cap),
    // then skip_all_reduce_unused_params and use_python_reducer.
    (void)limits;
    return std::make_shared<Reducer>(std::move(params), std::move(buckets), std::move(group),
                                     std::move(expect_sparse), cap, options.find_unused_parameters,
                                     /*gradient_as_bucket_view=*/false, std::move(names), first_cap,
                                     /*skip_all_reduce_unused_params=*/false,
                                     /*use_python_reducer=*/false, std::vector<int64_t>{});
  }
}

// The Reducer's comm hook over shared memory: each bucket averaged in place, on the thread that
// runs the backward pass, before the hook returns (a future already complete). Not through
// CppCommHookInterface, whose result parser LibTorch 1.13 does not export.
class ShmCommHook : public c10d::CommHookInterface {
 public:
  explicit ShmCommHook(std::shared_ptr<ShmAllreduce> shm) : shm_(std::move(shm)) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    at::Tensor& buffer = bucket.getBufferRef();
    shm_->average(buffer);
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
    future->markCompleted(c10::IValue(buffer));
    return future;
  }

  at::Tensor parseHookResult(const c10::IValue& result) override { return result.toTensor(); }

 private:
  std::shared_ptr<ShmAllreduce> shm_;
};

}  // namespace

DataParallel::DataParallel(std::shared_ptr<torch::nn::Module> module,
                           c10::intrusive_ptr<c10d::ProcessGroup> group,
                           const DataParallelOptions& options)
    : module_(std::move(module)), group_(std::move(group)), options_(options) {
  std::vector<torch::Tensor> params;
  std::unordered_map<size_t, std::string> names;
  for (const auto& item : module_->named_parameters()) {
    if (!item.value().requires_grad()) continue;
    names.emplace(params.size(), item.key());
    params.push_back(item.value());
  }
  for (const auto& buffer : module_->buffers()) buffers_.push_back(buffer);

  // Every rank starts from rank 0's weights (DDP's _sync_module_states).
  std::vector<torch::Tensor> states = params;
  states.insert(states.end(), buffers_.begin(), buffers_.end());
  if (!states.empty()) {
    torch::NoGradGuard no_grad;
    c10d::broadcast_coalesced(group_, states, kBroadcastBucketBytes, 0);
  }
  if (params.empty()) return;

  // Bucket assignment as torch/nn/parallel/distributed.py: by size with a small first bucket,
  // then reversed because gradients arrive roughly in reverse order of definition. The Reducer
  // rebuilds the buckets in true arrival order after the first iteration.
  const std::vector<bool> expect_sparse(params.size(), false);
  auto assignment = c10d::compute_bucket_assignment_by_size(
      params, {options_.first_bucket_cap_bytes, options_.bucket_cap_bytes}, expect_sparse);
  std::vector<std::vector<size_t>> buckets = std::get<0>(assignment);
  std::vector<size_t> limits = std::get<1>(assignment);
  std::reverse(buckets.begin(), buckets.end());
  std::reverse(limits.begin(), limits.end());

  reducer_ = make_reducer(params, std::move(buckets), std::move(limits), group_, expect_sparse,
                          std::move(names), options_);
  if (options_.shm) reducer_->register_comm_hook(std::make_unique<ShmCommHook>(options_.shm));
  logger_ = std::make_shared<c10d::Logger>(reducer_);
  reducer_->set_logger(logger_);
  logger_->set_construction_data_and_log(module_->name(), {}, -1, options_.broadcast_buffers,
                                         /*has_sync_bn=*/false, /*static_graph=*/false);
}

DataParallel::~DataParallel() {
  // The Logger reads the Reducer in its destructor: drop it first, as DDP does.
  logger_.reset();
  reducer_.reset();
}

void DataParallel::before_backward(const torch::Tensor& loss, bool sync) {
  if (!reducer_) return;
  // Buckets are rebuilt once, after the first iteration recorded the gradients' arrival order;
  // it broadcasts the new order, so every rank calls it at the same point.
  {
    torch::NoGradGuard no_grad;
    reducer_->rebuild_buckets();
  }
  if (options_.broadcast_buffers && !buffers_.empty() && sync) {
    torch::NoGradGuard no_grad;
    c10d::broadcast_coalesced(group_, buffers_, kBroadcastBucketBytes, 0);
  }
  if (!sync) return;
  reducer_->prepare_for_forward();
  if (options_.find_unused_parameters)
    reducer_->prepare_for_backward({loss});
  else
    reducer_->prepare_for_backward({});
}

}  // namespace acc::runtime::detail
