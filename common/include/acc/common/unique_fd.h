#pragma once

// An owned file descriptor: closed when the owner goes, moved but never copied, so that no path
// (an early return, an exception) leaks one and none is closed twice.

#include <unistd.h>

#include <utility>

namespace acc {

class UniqueFd {
 public:
  UniqueFd() = default;
  // Takes ownership of `fd` (-1: owns nothing).
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  // The descriptor, still owned here; -1 when none.
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  // Gives the descriptor up without closing it; the caller owns it.
  [[nodiscard]] int release() { return std::exchange(fd_, -1); }
  // Closes the owned descriptor (errors are ignored: after close() the descriptor is gone
  // whatever it returns) and owns `fd` instead.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace acc
