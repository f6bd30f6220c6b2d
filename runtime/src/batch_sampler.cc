#include "acc/runtime/batch_sampler.h"

#include <numeric>
#include <random>

#include "acc/common/error.h"

namespace acc {

std::vector<size_t> epoch_order(size_t dataset_size, bool shuffle, uint64_t seed, uint64_t epoch) {
  std::vector<size_t> order(dataset_size);
  std::iota(order.begin(), order.end(), size_t{0});
  if (!shuffle) return order;
  // Fisher-Yates with mt19937_64 and our own bounded draw: std::shuffle and
  // uniform_int_distribution differ between standard libraries, and every rank must agree.
  std::mt19937_64 rng(seed + epoch);
  for (size_t i = dataset_size; i > 1; --i) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % i;
    uint64_t draw = rng();
    while (draw >= limit) draw = rng();
    std::swap(order[i - 1], order[draw % i]);
  }
  return order;
}

std::vector<std::vector<size_t>> shard_batches(const std::vector<size_t>& order,
                                               const ShardSpec& spec) {
  ACC_CHECK(spec.batch_size > 0, ConfigError, "batch_size must be at least 1");
  ACC_CHECK(spec.world_size >= 1 && spec.rank >= 0 && spec.rank < spec.world_size, ConfigError,
            "rank ", spec.rank, " is not in a world of ", spec.world_size);
  const size_t bs = spec.batch_size;
  const size_t n = static_cast<size_t>(spec.world_size);
  const size_t r = static_cast<size_t>(spec.rank);
  const size_t full = order.size() / bs;
  const size_t tail = order.size() % bs;

  std::vector<std::vector<size_t>> mine;
  auto batch_at = [&](size_t b) {
    return std::vector<size_t>(
        order.begin() + static_cast<std::ptrdiff_t>(b * bs),
        order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), (b + 1) * bs)));
  };
  // Complete rounds: n full batches in a row.
  const size_t rounds = full / n;
  for (size_t round = 0; round < rounds; ++round) mine.push_back(batch_at(round * n + r));
  if (spec.drop_last || order.empty()) return mine;

  // What is left: full batches rounds*n .. full-1 and a tail of `tail` samples.
  size_t idx = rounds * n;  // index of the next batch to hand out
  if (!spec.even_batches) {
    if (idx + r < full || (idx + r == full && tail > 0)) mine.push_back(batch_at(idx + r));
    return mine;
  }
  if (idx == full && tail == 0) return mine;  // the order divides into whole rounds
  if (idx + r < full) mine.push_back(batch_at(idx + r));
  // Samples from the start of the order complete the round, cycling when the dataset is tiny.
  std::vector<size_t> initial(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), n * bs)));
  while (initial.size() < n * bs) {
    const size_t have = initial.size();
    for (size_t i = 0; i < have && initial.size() < n * bs; ++i) initial.push_back(initial[i]);
  }
  idx = full;
  std::vector<size_t> batch;
  if (tail > 0) batch = batch_at(full);
  size_t cycle = 0;
  while (idx % n != 0 || !batch.empty()) {
    const size_t need = bs - batch.size();
    batch.insert(batch.end(), initial.begin() + static_cast<std::ptrdiff_t>(cycle),
                 initial.begin() + static_cast<std::ptrdiff_t>(cycle + need));
    if (idx % n == r) mine.push_back(batch);
    cycle += need;
    batch.clear();
    ++idx;
  }
  return mine;
}

size_t last_round_remainder(size_t dataset_size, const ShardSpec& spec) {
  if (spec.drop_last) return 0;
  return dataset_size % (spec.batch_size * static_cast<size_t>(spec.world_size));
}

}  // namespace acc
