#pragma once

// A value worked out the first time it is asked for: a host fact that costs file reads (the CPUs
// from /proc/cpuinfo, the memory) is read only by a launch that needs it. A test sets the value
// itself. Not thread-safe.

#include <functional>
#include <utility>

namespace acc {

template <typename T>
class Lazy {
 public:
  Lazy(T value = T()) : value_(std::move(value)) {}  // NOLINT: a plain value converts
  explicit Lazy(std::function<T()> read) : read_(std::move(read)) {}
  Lazy& operator=(T value) {
    value_ = std::move(value);
    read_ = nullptr;
    return *this;
  }

  const T& get() const {
    if (read_) {
      value_ = read_();
      read_ = nullptr;
    }
    return value_;
  }

 private:
  mutable T value_{};
  mutable std::function<T()> read_;
};

}  // namespace acc
