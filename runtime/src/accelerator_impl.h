#pragma once

// The Accelerator's private state, shared by accelerator.cc and checkpoint.cc.

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "acc/common/progress_file.h"
#include "acc/runtime/accelerator.h"
#include "data_parallel.h"
#include "log.h"
#include "process_group.h"
#include "progress_beat.h"

namespace acc {

struct Accelerator::Impl {
  std::shared_ptr<spdlog::logger> logger;               // log.h
  runtime::detail::GroupHandle group;                   // empty in a world of one
  std::unique_ptr<runtime::detail::ProgressBeat> beat;  // with the group
  // Under acc-launch: the worker's progress file (a beat per optimizer step, a record per
  // collective of the Accelerator's own); null otherwise.
  std::unique_ptr<progress_file::Writer> progress;
  std::uint64_t collectives = 0;  // the default group's sequence number of the last one
  std::vector<std::shared_ptr<torch::nn::Module>> models;
  std::vector<std::unique_ptr<runtime::detail::DataParallel>> data_parallel;
  std::vector<torch::optim::Optimizer*> optimizers;
  // The prepared models' parameters: every parameter of a prepared optimizer must be one, or its
  // gradient would never be averaged.
  std::unordered_set<const c10::TensorImpl*> model_parameters;

  // backward() calls so far: synchronised ones (the reducers armed; in a world of one, those
  // outside no_sync() and accumulate()'s non-final micro-steps) and the others. An optimizer
  // step must see a synchronised one since that optimizer's last step: a plain
  // loss.backward() leaves gradients that are this rank's own.
  std::uint64_t synced_backwards = 0;
  std::uint64_t local_backwards = 0;
  struct BackwardsAtStep {
    std::uint64_t synced = 0;
    std::uint64_t local = 0;
  };
  std::unordered_map<const torch::optim::Optimizer*, BackwardsAtStep> backwards_at_step;
  std::vector<std::shared_ptr<uint64_t>> loader_epochs;

  // The fp16 gradient scaler (torch.cuda.amp.GradScaler's defaults).
  bool scaler = false;
  torch::Tensor scale;
  torch::Tensor growth_tracker;
  torch::Tensor found_inf;
  bool unscaled = false;

  // Under acc-launch: the seq of this job's next save_state in the node's memory (0: not known
  // yet), and whether that memory had no room (the saves then go to storage).
  int64_t memory_seq = 0;
  bool memory_full = false;
};

}  // namespace acc
