#pragma once

// An in-memory KeyValueStore with a clock of its own, for hermetic tests of what runs over a
// store (the elastic rendezvous): its time moves only when the test calls advance(), and the test
// can wait until the callers it expects are blocked on keys, so a test sequences threads by the
// store's state instead of by sleeps and wall-clock windows.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "acc/rendezvous/clock.h"
#include "acc/rendezvous/key_value_store.h"

namespace acc::rendezvous {

// Thread-safe: one object is shared by every node's thread. get(), multi_get() and wait() block
// until their keys are set or the store's time reaches their deadline (TimeoutError naming the
// keys); get() and multi_get() wait up to `get_timeout` of that time.
class MemoryStore final : public KeyValueStore, public Clock {
 public:
  explicit MemoryStore(std::chrono::milliseconds get_timeout = std::chrono::seconds(60));

  void set(std::string_view key, std::string_view value) override;
  std::string get(std::string_view key) override;
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::string>& values) override;

  // The store's time: starts at an arbitrary point and moves only by advance().
  time_point now() const override;
  // A date that moves as now() does.
  wall_time_point wall_now() const override;
  // Blocks until advance() brings the store's time to `deadline`, counted by await_blocked() as
  // a call blocked on keys is; after close(), throws StoreError as they do.
  void sleep_until(time_point deadline) const override;

  // Moves the store's time forward by `step`, then returns once every call blocked on keys has
  // seen the new time and either left (timed out) or blocks again.
  void advance(std::chrono::milliseconds step);

  // Blocks until exactly `count` calls are blocked on keys that are not set, each having seen
  // every change to the store so far. False when that has not happened within `guard` of real
  // time (a hang guard for a test that went wrong, never a window a passing test waits out).
  bool await_blocked(int count, std::chrono::milliseconds guard = std::chrono::seconds(20));

  // The number of keys set.
  std::size_t num_keys() const;

  // Ends every blocked call, and any later one, with StoreError: lets a test that failed halfway
  // join the threads it left blocked.
  void close();

 private:
  using Lock = std::unique_lock<std::mutex>;
  // Blocks on `lock` until every key is set; TimeoutError once now_ reaches now_ + timeout.
  void wait_locked(Lock& lock, const std::vector<std::string>& keys,
                   std::chrono::milliseconds timeout);
  bool all_set(const std::vector<std::string>& keys) const;
  bool settled() const;  // every blocked call saw the latest change
  void changed();        // a key was written: wake the blocked calls

  const std::chrono::milliseconds get_timeout_;
  mutable std::mutex mutex_;
  // Mutable for sleep_until(), which is const as the Clock's and blocks as a waiting call does.
  mutable std::condition_variable cv_;
  std::map<std::string, std::string, std::less<>> data_;
  time_point now_;
  bool closed_ = false;
  std::uint64_t version_ = 0;  // counts the changes (writes and advances)
  mutable std::uint64_t next_waiter_ = 0;
  mutable std::map<std::uint64_t, std::uint64_t>
      blocked_;  // blocked call -> the version it saw last
};

}  // namespace acc::rendezvous
