#pragma once

// Data parallelism for one module over c10d::Reducer, the engine under PyTorch's DDP (private).

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <memory>
#include <vector>

namespace c10d {
class Reducer;
class Logger;
}  // namespace c10d

namespace acc::runtime::detail {

class ShmAllreduce;

struct DataParallelOptions {
  size_t first_bucket_cap_bytes;
  size_t bucket_cap_bytes;
  bool find_unused_parameters;
  bool broadcast_buffers;
  // The buckets' all-reduce where every rank runs on this machine (shm_allreduce.h); null:
  // the process group's (Gloo, NCCL).
  std::shared_ptr<ShmAllreduce> shm;
};

class DataParallel {
 public:
  // Broadcasts the module's parameters and buffers from rank 0 (blocks) and builds the Reducer,
  // whose autograd hooks all-reduce bucket by bucket during backward.
  DataParallel(std::shared_ptr<torch::nn::Module> module,
               c10::intrusive_ptr<c10d::ProcessGroup> group, const DataParallelOptions& options);
  ~DataParallel();

  // Called by Accelerator::backward before loss.backward(): when `sync`, arms the Reducer for
  // this backward (DDP's _pre_forward/_post_forward, which we cannot hook in a C++ forward).
  void before_backward(const torch::Tensor& loss, bool sync);

  const std::shared_ptr<torch::nn::Module>& module() const { return module_; }

 private:
  std::shared_ptr<torch::nn::Module> module_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  DataParallelOptions options_;
  std::vector<torch::Tensor> buffers_;
  std::shared_ptr<c10d::Reducer> reducer_;
  std::shared_ptr<c10d::Logger> logger_;
};

}  // namespace acc::runtime::detail
