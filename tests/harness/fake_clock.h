#pragma once

// The tests' rendezvous::Clock, for every test binary (header-only): its time moves only when a
// test advances it or when a caller sleeps. A sleep moves the time straight to its end, so a unit
// that waits 600 s for a join timeout, one second between pre-flight tries or 100 ms between looks
// at a barrier runs in no wall-clock time, and the test asserts the exact time its deadline fired
// at instead of a wall-clock window.

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "acc/rendezvous/clock.h"
#include "acc/rendezvous/key_value_store.h"

namespace acc::testing {

// Thread-safe. on_sleep runs on the sleeping thread, without the clock's lock held.
class FakeClock final : public rendezvous::Clock {
 public:
  FakeClock() : start_(time_point() + std::chrono::hours(1)), now_(start_) {}

  time_point now() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return now_;
  }

  // A date that moves as now() does, from an arbitrary start.
  wall_time_point wall_now() const override { return kWallStart + (now() - start_); }

  void sleep_until(time_point deadline) const override {
    time_point reached;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      now_ = std::max(now_, deadline);
      ++sleeps_;
      reached = now_;
    }
    if (on_sleep) on_sleep(reached - start_);
  }

  // Looks once; keys that are missing are waited for by moving the time to the deadline, as a
  // sleep does: no wall-clock time passes, and a test sees whether an event ended a wait.
  bool wait_for_keys(rendezvous::KeyValueStore& store, const std::vector<std::string>& keys,
                     time_point deadline) const override {
    if (store.check(keys)) return true;
    sleep_until(deadline);
    return store.check(keys);
  }

  void advance(duration step) {
    std::lock_guard<std::mutex> lock(mutex_);
    now_ += step;
  }

  // How far the time moved since the clock was made.
  duration elapsed() const { return now() - start_; }
  std::chrono::milliseconds elapsed_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(elapsed());
  }

  // The date wall_now() says at the clock's start.
  static constexpr wall_time_point kWallStart{std::chrono::seconds(1'800'000'000)};

  int sleeps() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return sleeps_;
  }

  // After each sleep, with elapsed() then: lets a test act at a time (a listener comes up, a
  // stop signal arrives).
  std::function<void(duration)> on_sleep;

 private:
  const time_point start_;
  mutable std::mutex mutex_;
  mutable time_point now_;
  mutable int sleeps_ = 0;
};

}  // namespace acc::testing

namespace acc::launcher::testing {
// The launcher's tests name it testing::FakeClock beside their FakeOs.
using acc::testing::FakeClock;
}  // namespace acc::launcher::testing
