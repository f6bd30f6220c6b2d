#pragma once

// The time the elastic rendezvous and the launcher's waits (pre-flight, the static job's link)
// read their deadlines and heartbeat ages from, and sleep on, behind an interface so that tests
// move it by hand (leveldb's Env pattern, for the clock alone) instead of waiting for wall-clock
// windows to pass.

#include <chrono>

namespace acc::rendezvous {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  virtual ~Clock() = default;
  // Never goes back. Thread-safe in every implementation.
  virtual time_point now() const = 0;

  // Blocks until now() reaches `deadline` (returns at once when it has). A fake clock may move
  // its time there instead of blocking. Thread-safe.
  virtual void sleep_until(time_point deadline) const = 0;
  void sleep_for(duration length) const { sleep_until(now() + length); }

  // std::chrono::steady_clock's time and std::this_thread's sleeps; one object for the process,
  // never destroyed.
  static const Clock& steady();
};

}  // namespace acc::rendezvous
