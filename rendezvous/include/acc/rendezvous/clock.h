#pragma once

// The time the elastic rendezvous reads its deadlines and heartbeat ages from, behind an
// interface so that tests move it by hand (leveldb's Env pattern, for the clock alone) instead of
// waiting for wall-clock windows to pass.

#include <chrono>

namespace acc::rendezvous {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  // Never goes back. Thread-safe in every implementation.
  virtual time_point now() const = 0;

  // std::chrono::steady_clock's time; one object for the process, never destroyed.
  static const Clock& steady();
};

}  // namespace acc::rendezvous
