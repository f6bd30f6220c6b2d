#include "memory_store.h"

#include <algorithm>

#include "acc/common/error.h"

namespace acc::rendezvous {

MemoryStore::MemoryStore(std::chrono::milliseconds get_timeout)
    : get_timeout_(get_timeout), now_(time_point() + std::chrono::hours(1)) {}

void MemoryStore::changed() {
  ++version_;
  cv_.notify_all();
}

bool MemoryStore::all_set(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(),
                     [this](const std::string& key) { return data_.count(key) > 0; });
}

bool MemoryStore::settled() const {
  return std::all_of(blocked_.begin(), blocked_.end(),
                     [this](const auto& waiter) { return waiter.second == version_; });
}

void MemoryStore::wait_locked(Lock& lock, const std::vector<std::string>& keys,
                              std::chrono::milliseconds timeout) {
  const time_point deadline = now_ + timeout;
  const std::uint64_t id = next_waiter_++;
  struct Leave {
    MemoryStore& store;
    std::uint64_t id;
    ~Leave() {
      store.blocked_.erase(id);
      store.cv_.notify_all();
    }
  } leave{*this, id};
  for (;;) {
    if (closed_) throw StoreError("memory store closed");
    if (all_set(keys)) return;
    if (now_ >= deadline) {
      std::string names;
      for (const auto& key : keys) names += (names.empty() ? "" : ", ") + key;
      throw TimeoutError(
          acc::detail::concat("memory store: ", names, " not set within ", timeout.count(), " ms"));
    }
    blocked_[id] = version_;
    cv_.notify_all();  // await_blocked() and advance() count the blocked calls
    cv_.wait(lock);
  }
}

void MemoryStore::set(std::string_view key, std::string_view value) {
  Lock lock(mutex_);
  data_[std::string(key)] = std::string(value);
  changed();
}

std::string MemoryStore::get(std::string_view key) {
  Lock lock(mutex_);
  wait_locked(lock, {std::string(key)}, get_timeout_);
  return data_.find(key)->second;
}

std::int64_t MemoryStore::add(std::string_view key, std::int64_t delta) {
  Lock lock(mutex_);
  std::int64_t value = 0;
  if (auto found = data_.find(key); found != data_.end()) {
    try {
      value = std::stoll(found->second);
    } catch (const std::exception&) {
      throw StoreError("memory store: add to " + std::string(key) + ", not an integer");
    }
  }
  value += delta;
  data_[std::string(key)] = std::to_string(value);
  changed();
  return value;
}

std::string MemoryStore::compare_set(std::string_view key, std::string_view expected,
                                     std::string_view desired) {
  Lock lock(mutex_);
  auto found = data_.find(key);
  if (found == data_.end()) {
    if (!expected.empty()) return std::string(expected);
    data_[std::string(key)] = std::string(desired);
    changed();
    return std::string(desired);
  }
  if (found->second == expected) {
    found->second = std::string(desired);
    changed();
  }
  return found->second;
}

void MemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Lock lock(mutex_);
  wait_locked(lock, keys, timeout);
}

bool MemoryStore::check(const std::vector<std::string>& keys) {
  Lock lock(mutex_);
  return all_set(keys);
}

std::vector<std::string> MemoryStore::multi_get(const std::vector<std::string>& keys) {
  Lock lock(mutex_);
  wait_locked(lock, keys, get_timeout_);
  std::vector<std::string> values;
  for (const auto& key : keys) values.push_back(data_.find(key)->second);
  return values;
}

void MemoryStore::multi_set(const std::vector<std::string>& keys,
                            const std::vector<std::string>& values) {
  ACC_ASSERT(keys.size() == values.size());
  Lock lock(mutex_);
  for (std::size_t i = 0; i < keys.size(); ++i) data_[keys[i]] = values[i];
  changed();
}

Clock::time_point MemoryStore::now() const {
  Lock lock(mutex_);
  return now_;
}

Clock::wall_time_point MemoryStore::wall_now() const {
  // A date that moves with the store's time, from an arbitrary start.
  return wall_time_point(std::chrono::hours(24 * 365 * 57)) + (now() - time_point());
}

void MemoryStore::sleep_until(time_point deadline) const {
  Lock lock(mutex_);
  const std::uint64_t id = next_waiter_++;
  struct Leave {
    const MemoryStore& store;
    std::uint64_t id;
    ~Leave() {
      store.blocked_.erase(id);
      store.cv_.notify_all();
    }
  } leave{*this, id};
  while (now_ < deadline) {
    if (closed_) throw StoreError("memory store closed");
    blocked_[id] = version_;
    cv_.notify_all();  // await_blocked() and advance() count the sleepers too
    cv_.wait(lock);
  }
}

void MemoryStore::advance(std::chrono::milliseconds step) {
  Lock lock(mutex_);
  now_ += step;
  changed();
  cv_.wait(lock, [this] { return settled(); });
}

bool MemoryStore::await_blocked(int count, std::chrono::milliseconds guard) {
  Lock lock(mutex_);
  return cv_.wait_for(
      lock, guard, [&] { return blocked_.size() == static_cast<std::size_t>(count) && settled(); });
}

void MemoryStore::close() {
  Lock lock(mutex_);
  closed_ = true;
  changed();
}

std::size_t MemoryStore::num_keys() const {
  Lock lock(mutex_);
  return data_.size();
}

}  // namespace acc::rendezvous
