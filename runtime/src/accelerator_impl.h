#pragma once

// The Accelerator's private state, shared by accelerator.cc and checkpoint.cc.

#include <cstdint>
#include <memory>
#include <vector>

#include "acc/common/progress_file.h"
#include "acc/runtime/accelerator.h"
#include "data_parallel.h"
#include "process_group.h"
#include "progress_beat.h"

namespace acc {

struct Accelerator::Impl {
  runtime::detail::GroupHandle group;                   // empty in a world of one
  std::unique_ptr<runtime::detail::ProgressBeat> beat;  // with the group
  // Under acc-launch: the worker's progress file (a beat per optimizer step, a record per
  // collective of the Accelerator's own); null otherwise.
  std::unique_ptr<progress_file::Writer> progress;
  std::uint64_t collectives = 0;  // the default group's sequence number of the last one
  std::vector<std::shared_ptr<torch::nn::Module>> models;
  std::vector<std::unique_ptr<runtime::detail::DataParallel>> data_parallel;
  std::vector<torch::optim::Optimizer*> optimizers;
  std::vector<std::shared_ptr<uint64_t>> loader_epochs;

  // The fp16 gradient scaler (torch.cuda.amp.GradScaler's defaults).
  bool scaler = false;
  torch::Tensor scale;
  torch::Tensor growth_tracker;
  torch::Tensor found_inf;
  bool unscaled = false;
};

}  // namespace acc
