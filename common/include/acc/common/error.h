#pragma once

// The error hierarchy shared by every module (docs/errors.md maps each one to an exit code).
// Thrown for a user's mistake or an environment problem; the message is one line that says what,
// where and how to fix it. Internal invariants use ACC_ASSERT, whose message says "bug".

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace acc {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bad config file, flag or environment variable. Exit code 2.
class ConfigError : public Error {
 public:
  using Error::Error;
};
// The key-value store refused or broke a request. Exit code 3.
class StoreError : public Error {
 public:
  using Error::Error;
};
// A socket could not be bound, connected or read. Exit code 3.
class NetworkError : public Error {
 public:
  using Error::Error;
};
// Something did not happen in time (rendezvous, store wait, barrier). Exit code 4.
class TimeoutError : public Error {
 public:
  using Error::Error;
};
// The program cannot be run (not found, not executable, exec failed). Exit code 127, as a shell.
class LaunchError : public Error {
 public:
  using Error::Error;
};
// A communication backend (Gloo, NCCL) failed or is missing. Exit code 6.
class BackendError : public Error {
 public:
  using Error::Error;
};
// A GPU of this node is unfit to run workers: NVML reports uncorrected memory errors, pages or rows
// waiting to be retired or remapped, or a GPU that needs a reset (docs/launch.md, "GPU health").
// Exit code 8.
class GpuError : public Error {
 public:
  using Error::Error;
};
// The operating system refused acc-launch something it needs (poll, signalfd, fork, a temporary
// directory): not the user's program nor input. Exit code 1.
class SystemError : public Error {
 public:
  using Error::Error;
};

// The launcher was asked to stop (SIGINT, SIGTERM, ...) while it waited for something other than
// its workers: a rendezvous, a barrier, a pre-flight check. Exit code 128 + the signal, as a shell.
class InterruptedError : public Error {
 public:
  InterruptedError(int signal, const std::string& what) : Error(what), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}
}  // namespace detail

}  // namespace acc

// ACC_CHECK(cond, ErrorType, message parts...): throws ErrorType(message) when cond is false.
#define ACC_CHECK(cond, ErrorType, ...)                               \
  do {                                                                \
    if (!(cond)) throw ErrorType(::acc::detail::concat(__VA_ARGS__)); \
  } while (0)

// ACC_ASSERT(cond): an internal invariant; failing it is a bug in acc-launch.
#define ACC_ASSERT(cond)                                                                           \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      throw ::acc::Error(::acc::detail::concat("bug: assertion failed: ", #cond, " at ", __FILE__, \
                                               ":", __LINE__));                                    \
  } while (0)
