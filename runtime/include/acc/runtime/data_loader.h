#pragma once

// A map-style dataset held as tensors and a loader that, once prepared by the Accelerator, reads
// only this rank's shard (see batch_sampler.h) and moves each batch to the Accelerator's device.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "acc/runtime/batch_sampler.h"

namespace acc {

// One batch: the stacked inputs and their targets.
struct Batch {
  torch::Tensor data;
  torch::Tensor target;
};

// Samples are the rows (dim 0) of `data` and `targets`. Copies share the tensors. Thread-safe
// for concurrent reads.
class TensorDataset {
 public:
  // Throws acc::ConfigError when the two tensors differ in length along dim 0.
  TensorDataset(torch::Tensor data, torch::Tensor targets);

  size_t size() const { return static_cast<size_t>(data_.size(0)); }
  // The rows `indices`, in that order (a copy). Throws c10::Error on an index out of range.
  Batch get(const std::vector<size_t>& indices) const;

  const torch::Tensor& data() const { return data_; }
  const torch::Tensor& targets() const { return targets_; }

 private:
  torch::Tensor data_;
  torch::Tensor targets_;
};

struct DataLoaderOptions {
  // Samples per batch on each process (Accelerate's meaning: the global batch is
  // batch_size * num_processes).
  size_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;
  // The shuffle of epoch e is drawn from seed + e, the same on every rank.
  uint64_t seed = 0;
};

// Where the Accelerator and its loaders meet: whether the batch just handed out is the last
// of its epoch and how many rows of the last round are real (gather_for_metrics uses both).
struct GradientState {
  bool end_of_dataloader = false;
  size_t remainder = 0;
};

// Iterates batches of a TensorDataset. Before `Accelerator::prepare` it reads every sample (a
// world of one); the prepared copy reads this rank's shard. Each complete pass advances the
// epoch, which reseeds the shuffle, as Accelerate's DataLoaderShard does. Not thread-safe; an
// iterator is valid while its loader lives and no other iteration of it starts.
class DataLoader {
 public:
  DataLoader(TensorDataset dataset, DataLoaderOptions options);

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = const Batch*;
    using reference = const Batch&;

    const Batch& operator*() const { return current_; }
    const Batch* operator->() const { return &current_; }
    Iterator& operator++();
    bool operator==(const Iterator& other) const { return index_ == other.index_; }
    bool operator!=(const Iterator& other) const { return index_ != other.index_; }

   private:
    friend class DataLoader;
    Iterator(DataLoader* loader, size_t index);
    void load();

    DataLoader* loader_;
    size_t index_;
    Batch current_;
  };

  // Starts a pass over the current epoch's batches (blocks while the first batch is copied).
  Iterator begin();
  Iterator end();

  // Batches this rank reads per epoch.
  size_t size() const;
  // The epoch the next pass reads; set it when resuming.
  // Copies of a prepared loader share it.
  uint64_t epoch() const { return *epoch_; }
  void set_epoch(uint64_t epoch) { *epoch_ = epoch; }
  std::shared_ptr<uint64_t> epoch_counter() const { return epoch_; }
  const TensorDataset& dataset() const { return dataset_; }
  const DataLoaderOptions& options() const { return options_; }
  // Samples per epoch over all ranks, padding included.
  size_t total_samples() const;

  // Called by Accelerator::prepare: this copy reads shard `rank` of `world_size` onto `device`.
  void shard(int rank, int world_size, bool even_batches, torch::Device device,
             std::shared_ptr<GradientState> state);

 private:
  TensorDataset dataset_;
  DataLoaderOptions options_;
  ShardSpec spec_;
  torch::Device device_ = torch::kCPU;
  std::shared_ptr<GradientState> state_;
  std::shared_ptr<uint64_t> epoch_ = std::make_shared<uint64_t>(0);
  std::vector<std::vector<size_t>> batches_;  // the pass under way
};

}  // namespace acc
