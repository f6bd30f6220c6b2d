#include "acc/runtime/data_loader.h"

#include "acc/common/error.h"

namespace acc {

TensorDataset::TensorDataset(torch::Tensor data, torch::Tensor targets)
    : data_(std::move(data)), targets_(std::move(targets)) {
  ACC_CHECK(data_.defined() && targets_.defined() && data_.dim() > 0 && targets_.dim() > 0 &&
                data_.size(0) == targets_.size(0),
            ConfigError, "TensorDataset: data and targets must have the same length along dim 0");
}

Batch TensorDataset::get(const std::vector<size_t>& indices) const {
  auto index = torch::empty({static_cast<int64_t>(indices.size())}, torch::kLong);
  auto* out = index.data_ptr<int64_t>();
  for (size_t i = 0; i < indices.size(); ++i) out[i] = static_cast<int64_t>(indices[i]);
  return {data_.index_select(0, index), targets_.index_select(0, index)};
}

namespace detail {

Batch to_batch(torch::data::Example<> example) {
  return {std::move(example.data), std::move(example.target)};
}

Batch to_batch(torch::data::TensorExample example) {
  return {std::move(example.data), torch::Tensor()};
}

// As torch::data::transforms::Stack<> does, so a dataset yields the same batches with or
// without it.
Batch to_batch(std::vector<torch::data::Example<>> examples) {
  std::vector<torch::Tensor> data, targets;
  data.reserve(examples.size());
  targets.reserve(examples.size());
  for (auto& example : examples) {
    data.push_back(std::move(example.data));
    targets.push_back(std::move(example.target));
  }
  return {torch::stack(data), torch::stack(targets)};
}

Batch to_batch(std::vector<torch::data::TensorExample> examples) {
  std::vector<torch::Tensor> data;
  data.reserve(examples.size());
  for (auto& example : examples) data.push_back(std::move(example.data));
  return {torch::stack(data), torch::Tensor()};
}

size_t map_style_size(bool sized, size_t size) {
  ACC_CHECK(sized, ConfigError,
            "DataLoader: the torch::data dataset has no size(); acc::DataLoader shards "
            "map-style datasets, whose size() gives the number of samples");
  return size;
}

}  // namespace detail

DataLoader::DataLoader(TensorDataset dataset, DataLoaderOptions options)
    : DataLoader(detail::BatchReader{dataset.size(),
                                     [dataset](const std::vector<size_t>& indices) {
                                       return dataset.get(indices);
                                     }},
                 options) {
  tensors_ = std::move(dataset);
}

DataLoader::DataLoader(detail::BatchReader reader, DataLoaderOptions options)
    : reader_(std::move(reader)), options_(options) {
  ACC_CHECK(options_.batch_size > 0, ConfigError, "DataLoader: batch_size must be at least 1");
  spec_.batch_size = options_.batch_size;
  spec_.drop_last = options_.drop_last;
}

void DataLoader::shard(int rank, int world_size, bool even_batches, torch::Device device,
                       std::shared_ptr<GradientState> state) {
  spec_.rank = rank;
  spec_.world_size = world_size;
  spec_.even_batches = even_batches;
  device_ = device;
  state_ = std::move(state);
  epoch_ = std::make_shared<uint64_t>(*epoch_);
}

const TensorDataset& DataLoader::dataset() const {
  ACC_CHECK(tensors_.has_value(), ConfigError,
            "DataLoader::dataset(): this loader reads a torch::data dataset, not a "
            "TensorDataset; dataset_size() gives its size");
  return *tensors_;
}

size_t DataLoader::size() const {
  return shard_batches(epoch_order(reader_.size, false, 0, 0), spec_).size();
}

size_t DataLoader::total_samples() const {
  return size() * spec_.batch_size * static_cast<size_t>(spec_.world_size);
}

DataLoader::Iterator DataLoader::begin() {
  batches_ =
      shard_batches(epoch_order(reader_.size, options_.shuffle, options_.seed, *epoch_), spec_);
  if (batches_.empty()) ++*epoch_;
  return Iterator(this, 0);
}

DataLoader::Iterator DataLoader::end() {
  return Iterator(nullptr, batches_.size());
}

DataLoader::Iterator::Iterator(DataLoader* loader, size_t index) : loader_(loader), index_(index) {
  if (loader_ != nullptr) load();
}

void DataLoader::Iterator::load() {
  if (index_ >= loader_->batches_.size()) return;
  current_ = loader_->reader_.read(loader_->batches_[index_]);
  if (loader_->device_ != torch::kCPU) {
    current_.data = current_.data.to(loader_->device_, /*non_blocking=*/true);
    if (current_.target.defined())  // a TensorExample dataset has no targets
      current_.target = current_.target.to(loader_->device_, /*non_blocking=*/true);
  }
  if (loader_->state_) {
    loader_->state_->end_of_dataloader = index_ + 1 == loader_->batches_.size();
    loader_->state_->remainder = last_round_remainder(loader_->reader_.size, loader_->spec_);
  }
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++index_;
  if (index_ == loader_->batches_.size()) {
    ++*loader_->epoch_;
    current_ = Batch{};
    if (loader_->state_) loader_->state_->end_of_dataloader = false;
  } else {
    load();
  }
  return *this;
}

}  // namespace acc
