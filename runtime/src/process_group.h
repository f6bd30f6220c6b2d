#pragma once

// Joining the worker group: the store and the process group (private to the runtime).

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>

#include "acc/runtime/worker_env.h"

namespace acc::runtime::detail {

struct GroupHandle {
  c10::intrusive_ptr<c10d::Store> store;  // prefixed with this restart attempt
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  // Releases the backend's resources (NCCL communicators) before the group is dropped, as
  // destroy_process_group() does; empty where there is nothing to release.
  std::function<void()> shutdown;
};

// Connects to MASTER_ADDR:MASTER_PORT (rank 0 hosts a c10d::TCPStore unless the agent store is
// in use), scopes the keys to /worker/attempt_<restart_count>, and creates ProcessGroupGloo (CPU)
// or ProcessGroupNCCL (CUDA, when compiled with NCCL). Blocks until all ranks joined.
// Throws acc::TimeoutError or acc::BackendError.
GroupHandle join_group(const WorkerEnv& env, bool cuda, std::chrono::milliseconds timeout);

}  // namespace acc::runtime::detail
