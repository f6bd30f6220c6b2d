#pragma once

// A map-style dataset held as tensors and a loader that, once prepared by the Accelerator, reads
// only this rank's shard (see batch_sampler.h) and moves each batch to the Accelerator's device.
// The loader also reads LibTorch's own map-style datasets (torch::data::datasets::Dataset), with
// the same sharding.

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
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

namespace detail {

// Whether T is a torch::data dataset: it derives from BatchDataset<Self, Batch, Request>.
template <typename T, typename = void>
struct IsTorchDataset : std::false_type {};
template <typename T>
struct IsTorchDataset<
    T, std::void_t<typename T::SelfType, typename T::BatchType, typename T::BatchRequestType>>
    : std::is_base_of<
          torch::data::datasets::BatchDataset<typename T::SelfType, typename T::BatchType,
                                              typename T::BatchRequestType>,
          T> {};
template <typename T>
inline constexpr bool kIsTorchDataset = IsTorchDataset<std::decay_t<T>>::value;

// Whether T is what torch::data::make_data_loader returns, or the loader it points to.
template <typename T>
struct IsTorchDataLoader : std::false_type {};
template <typename D, typename S>
struct IsTorchDataLoader<torch::data::StatelessDataLoader<D, S>> : std::true_type {};
template <typename D>
struct IsTorchDataLoader<torch::data::StatefulDataLoader<D>> : std::true_type {};
template <typename T>
struct IsTorchDataLoader<std::unique_ptr<T>> : IsTorchDataLoader<T> {};
template <typename T>
inline constexpr bool kIsTorchDataLoader = IsTorchDataLoader<std::decay_t<T>>::value;

// The batch types a loader turns into acc::Batch: an Example<> (or TensorExample) per sample,
// which it stacks as torch::data::transforms::Stack<> does, or one already stacked or collated.
template <typename T>
inline constexpr bool kIsExampleBatch =
    std::is_same_v<T, torch::data::Example<>> || std::is_same_v<T, torch::data::TensorExample> ||
    std::is_same_v<T, std::vector<torch::data::Example<>>> ||
    std::is_same_v<T, std::vector<torch::data::TensorExample>>;

Batch to_batch(torch::data::Example<> example);
Batch to_batch(torch::data::TensorExample example);  // target undefined
Batch to_batch(std::vector<torch::data::Example<>> examples);
Batch to_batch(std::vector<torch::data::TensorExample> examples);

// A dataset as the loader sees it: its size and its batches by index. Copies share the dataset.
struct BatchReader {
  size_t size = 0;
  std::function<Batch(const std::vector<size_t>& indices)> read;
};

// `size` when `sized`; throws acc::ConfigError otherwise (a dataset whose size() is empty).
size_t map_style_size(bool sized, size_t size);

template <typename Dataset>
BatchReader read_batches(Dataset dataset) {
  constexpr bool map_style =
      !Dataset::is_stateful &&
      std::is_same_v<typename Dataset::BatchRequestType, c10::ArrayRef<size_t>>;
  constexpr bool examples = kIsExampleBatch<typename Dataset::BatchType>;
  static_assert(map_style,
                "acc::DataLoader reads map-style torch::data datasets (get(index) and size()): "
                "a stream or chunk dataset has no indices to shard across ranks");
  static_assert(examples,
                "acc::DataLoader reads torch::data datasets of torch::data::Example<> (or "
                "TensorExample), per sample or stacked with "
                ".map(torch::data::transforms::Stack<>()); collate other batch types into an "
                "Example<> with a torch::data::transforms::BatchTransform");
  auto shared = std::make_shared<Dataset>(std::move(dataset));
  BatchReader reader;
  const auto size = shared->size();  // c10::optional in LibTorch 1.13, std::optional in 2.x
  reader.size = map_style_size(size.has_value(), size.value_or(0));
  if constexpr (map_style && examples)
    reader.read = [shared](const std::vector<size_t>& indices) {
      return to_batch(shared->get_batch(indices));
    };
  return reader;
}

}  // namespace detail

// Where the Accelerator and its loaders meet: whether the batch just handed out is the last
// of its epoch and how many rows of the last round are real (gather_for_metrics uses both).
struct GradientState {
  bool end_of_dataloader = false;
  size_t remainder = 0;
};

// Iterates batches of a TensorDataset or of a torch::data map-style dataset. Before
// `Accelerator::prepare` it reads every sample (a world of one); the prepared copy reads this
// rank's shard. Each complete pass advances the epoch, which reseeds the shuffle, as Accelerate's
// DataLoaderShard does. Not thread-safe; an iterator is valid while its loader lives and no other
// iteration of it starts. Throws acc::ConfigError when batch_size is 0.
class DataLoader {
 public:
  DataLoader(TensorDataset dataset, DataLoaderOptions options);
  // A torch::data map-style dataset: a class derived from
  // torch::data::datasets::Dataset<Self, Example<>> (get(index), size()), possibly mapped
  // (.map(Stack<>()), a per-sample transform, a collate into one Example<>), or
  // torch::data::datasets::TensorDataset. The loader owns it (copies of the loader share it)
  // and asks it for each batch's indices with get_batch; the indices are those a TensorDataset
  // of the same size gets. A batch of Examples is stacked (torch::stack, as Stack<> does) into
  // acc::Batch{data, target}; a TensorExample's target stays undefined. Throws
  // acc::ConfigError when the dataset has no size. Other dataset kinds fail to compile with a
  // sentence saying why.
  template <typename Dataset, typename = std::enable_if_t<detail::kIsTorchDataset<Dataset>>>
  DataLoader(Dataset dataset, DataLoaderOptions options)
      : DataLoader(detail::read_batches(std::move(dataset)), options) {}

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
  // Samples in the dataset (one epoch over all ranks, padding excluded).
  size_t dataset_size() const { return reader_.size; }
  // The TensorDataset the loader was built from; throws acc::ConfigError for a loader of a
  // torch::data dataset.
  const TensorDataset& dataset() const;
  const DataLoaderOptions& options() const { return options_; }
  // Samples per epoch over all ranks, padding included.
  size_t total_samples() const;

  // Called by Accelerator::prepare: this copy reads shard `rank` of `world_size` onto `device`.
  void shard(int rank, int world_size, bool even_batches, torch::Device device,
             std::shared_ptr<GradientState> state);

 private:
  DataLoader(detail::BatchReader reader, DataLoaderOptions options);

  std::optional<TensorDataset> tensors_;  // set when built from a TensorDataset
  detail::BatchReader reader_;
  DataLoaderOptions options_;
  ShardSpec spec_;
  torch::Device device_ = torch::kCPU;
  std::shared_ptr<GradientState> state_;
  std::shared_ptr<uint64_t> epoch_ = std::make_shared<uint64_t>(0);
  std::vector<std::vector<size_t>> batches_;  // the pass under way
};

}  // namespace acc
