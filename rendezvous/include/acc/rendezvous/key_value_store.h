#pragma once

// The key-value operations the elastic rendezvous is written against, so that its rounds run the
// same on our TCPStore-compatible store (StoreClient) and on an etcd cluster (EtcdClient). Keys
// and values are byte strings; a key exists once set. Implementations are not thread-safe and
// throw NetworkError when the store cannot be reached, TimeoutError when a wait runs out.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace acc::rendezvous {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;

  virtual void set(std::string_view key, std::string_view value) = 0;
  // Waits up to the implementation's timeout for the key to exist, then returns its value.
  virtual std::string get(std::string_view key) = 0;
  // Adds `delta` to the integer stored under `key` (created at 0) and returns the new value.
  virtual std::int64_t add(std::string_view key, std::int64_t delta) = 0;
  // Sets `desired` if the value is `expected` (a missing key counts as empty) and returns the
  // value now stored; when the key is missing and `expected` is not empty, returns `expected`.
  virtual std::string compare_set(std::string_view key, std::string_view expected,
                                  std::string_view desired) = 0;
  // Blocks until every key exists or `timeout` passes (TimeoutError naming the keys).
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // True when every key exists now; never blocks on the keys.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits for all keys (as get()), then returns their values in order.
  virtual std::vector<std::string> multi_get(const std::vector<std::string>& keys) = 0;
  virtual void multi_set(const std::vector<std::string>& keys,
                         const std::vector<std::string>& values) = 0;
};

// The values of `keys`, "" for a key that is not set: one CHECK and one MULTI_GET where all are
// set (a MULTI_GET waits for a missing key), else a CHECK and a GET per key.
inline std::vector<std::string> values_where_set(KeyValueStore& store,
                                                 const std::vector<std::string>& keys) {
  if (keys.empty()) return {};
  if (store.check(keys)) return store.multi_get(keys);
  std::vector<std::string> values(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (store.check({keys[i]})) values[i] = store.get(keys[i]);
  return values;
}

}  // namespace acc::rendezvous
