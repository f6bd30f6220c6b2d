#pragma once

// Which samples each rank reads, as Accelerate's BatchSamplerShard (split_batches=False) over a
// SeedableRandomSampler: the epoch's order is cut into batches of `batch_size`, batch i goes to
// rank i % world_size. With even_batches the last round is completed with samples from the start
// of the order, so every rank runs the same number of full batches; with drop_last incomplete
// rounds are dropped. Pure logic: no LibTorch.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace acc {

// The order of the dataset's indices in `epoch`: 0..n-1, or a permutation drawn from
// seed + epoch (identical on every rank and every platform) when `shuffle`.
std::vector<size_t> epoch_order(size_t dataset_size, bool shuffle, uint64_t seed, uint64_t epoch);

struct ShardSpec {
  size_t batch_size = 1;
  int rank = 0;
  int world_size = 1;
  bool drop_last = false;
  bool even_batches = true;
};

// This rank's batches (lists of dataset indices) for one epoch whose order is `order`.
// Throws acc::ConfigError when batch_size is 0 or rank is not below world_size.
std::vector<std::vector<size_t>> shard_batches(const std::vector<size_t>& order,
                                               const ShardSpec& spec);

// How many of the rows gathered from the last round are real samples: dataset_size %
// (batch_size * world_size), or 0 when that divides (or with drop_last: nothing is padded).
size_t last_round_remainder(size_t dataset_size, const ShardSpec& spec);

}  // namespace acc
