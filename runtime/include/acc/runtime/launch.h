#pragma once

// acc::launch: runs a training function in N worker processes started from the calling program,
// as Accelerate's notebook_launcher and torch.multiprocessing.spawn do, with no launcher command:
//
//   int main() {
//     double accuracy = acc::launch([] { acc::Accelerator acc; ...; return accuracy; },
//                                   {/*num_processes=*/2});
//   }
//
// The workers are this same program, started again (/proc/self/exe, the same arguments) with a
// marker variable: each runs main() from the top, and its call to acc::launch runs `fn` and ends
// the worker instead of starting workers. So code before the call runs in every worker too, and
// the program must reach the call in each (docs/runtime.md, "Launching from main()").
//
// acc::launch can be called again once a call has returned. The workers of a later call meet the
// earlier calls first: those return what they returned in the caller (or throw what it threw)
// without running their `fn`, so the worker's main() takes the caller's path to its own call.
//
// Each worker gets the torchrun contract (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*) and the Accelerate variables, and the calling process
// serves their store (PyTorch's TCPStore protocol), so an acc::Accelerator inside `fn` joins
// unchanged. The worker group is acc-launch's own (its agent, spawning, watchdog and failure
// report): one worker failing stops the others and acc::launch throws with the report acc-launch
// prints; SIGINT, SIGTERM, SIGHUP or SIGQUIT to the caller stop every worker; a caller killed
// with SIGKILL takes its workers with it.
//
// Results: `fn` returns void, std::string (bytes), torch::Tensor (sent with torch::pickle_save)
// or an arithmetic type. acc::launch returns rank 0's; acc::launch_all returns every rank's,
// indexed by rank. Results travel through files in a private temporary directory.

#include <torch/types.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "acc/common/error.h"

namespace acc {

struct LaunchOptions {
  // The number of worker processes, all on this machine (>= 1).
  int num_processes = 1;
  // ACCELERATE_MIXED_PRECISION in the workers: "no", "fp16" or "bf16".
  std::string mixed_precision = "no";
  // Where the workers reach the caller's store; port 0: a free port the caller binds.
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  // Restarts of the whole group after a failure (torchrun's --max_restarts).
  int max_restarts = 0;
  // Seconds from the stop signal (SIGTERM) to SIGKILL when the group is stopped.
  double shutdown_timeout = 30;
  // Put before every line a worker prints; ${rank} and ${local_rank} are expanded.
  std::string log_line_prefix = "[rank${rank}]: ";
  // Variables set in every worker, above the caller's environment.
  std::vector<std::pair<std::string, std::string>> env;
  // The arguments after argv[0] the workers' main() gets; unset: the caller's own.
  std::optional<std::vector<std::string>> worker_args;
};

namespace detail {

// In the caller: runs the worker group to its end and returns each rank's result bytes, indexed
// by rank. In a worker started for this call: runs `body`, stores what it returns and ends the
// process (never returns). Throws as acc::launch does.
std::vector<std::string> launch_bytes(const std::function<std::string()>& body,
                                      const LaunchOptions& options);

std::string tensor_to_bytes(const torch::Tensor& tensor);
torch::Tensor tensor_from_bytes(const std::string& bytes);

template <typename R>
struct ResultCodec {
  static_assert(std::is_arithmetic<R>::value,
                "acc::launch: fn must return void, std::string, torch::Tensor or an arithmetic "
                "type; serialise anything else into a std::string");
  static std::string encode(const R& value) {
    return std::string(reinterpret_cast<const char*>(&value), sizeof(R));
  }
  static R decode(const std::string& bytes) {
    R value{};
    std::memcpy(&value, bytes.data(), std::min(bytes.size(), sizeof(R)));
    return value;
  }
};
template <>
struct ResultCodec<std::string> {
  static std::string encode(const std::string& value) { return value; }
  static std::string decode(const std::string& bytes) { return bytes; }
};
template <>
struct ResultCodec<torch::Tensor> {
  static std::string encode(const torch::Tensor& value) { return tensor_to_bytes(value); }
  static torch::Tensor decode(const std::string& bytes) { return tensor_from_bytes(bytes); }
};

template <typename Fn>
using LaunchResultOf = std::decay_t<std::invoke_result_t<Fn&>>;

template <typename Fn>
std::vector<std::string> run_encoded(Fn& fn, const LaunchOptions& options) {
  using R = LaunchResultOf<Fn>;
  return launch_bytes(
      [&fn]() -> std::string {
        if constexpr (std::is_void<R>::value) {
          fn();
          return std::string();
        } else {
          return ResultCodec<R>::encode(fn());
        }
      },
      options);
}

}  // namespace detail

// Runs `fn` in options.num_processes workers and returns rank 0's result (nothing when `fn`
// returns void). Blocks until every worker has ended. Call it from one thread, before the
// program starts threads of its own or initialises CUDA; again, on the same terms, once it has
// returned (the calling process keeps each call's results for the workers of later calls).
//
// Throws acc::LaunchError with acc-launch's failure report (each rank's exit code or signal, the
// failing rank's stderr tail) when a worker fails (an exception out of `fn` ends that worker with
// exit code 1 and its message on stderr); acc::InterruptedError when the caller received a stop
// signal (the workers were stopped first); acc::ConfigError for bad options, a call after CUDA
// was initialised, or a program that already runs other threads; acc::NetworkError when the
// store's port is taken.
template <typename Fn>
detail::LaunchResultOf<Fn> launch(Fn&& fn, const LaunchOptions& options = {}) {
  using R = detail::LaunchResultOf<Fn>;
  std::vector<std::string> results = detail::run_encoded(fn, options);
  if constexpr (!std::is_void<R>::value) return detail::ResultCodec<R>::decode(results.at(0));
}

// As launch, and returns every rank's result, indexed by rank.
template <typename Fn>
std::vector<detail::LaunchResultOf<Fn>> launch_all(Fn&& fn, const LaunchOptions& options = {}) {
  using R = detail::LaunchResultOf<Fn>;
  static_assert(!std::is_void<R>::value, "acc::launch_all: fn returns nothing to gather");
  std::vector<R> all;
  for (const std::string& bytes : detail::run_encoded(fn, options))
    all.push_back(detail::ResultCodec<R>::decode(bytes));
  return all;
}

// Whether this process is a worker that acc::launch started (ACC_LAUNCH_WORKER is set). Lets
// main() skip work before the call that only the caller needs. Non-blocking, thread-safe.
bool is_launched_worker();

}  // namespace acc
