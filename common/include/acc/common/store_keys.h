#pragma once

// Names of the keys the launcher and the runtime share in a worker group's store. Both sides
// spell them through these functions, so a rename cannot leave one side waiting on a key the other
// never writes. Header-only and C++17, as the runtime's installed headers.

#include <string>

namespace acc::store_keys {

// The key a worker's ProgressBeat adds 1 to on each step, relative to the worker's own store
// (PyTorch's workers prefix it with worker_attempt_prefix).
inline std::string beat(int rank) {
  return "acc/beat/" + std::to_string(rank);
}

// The prefix PyTorch's workers give every key of restart attempt `restart_count`
// (torch.distributed.elastic's "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>/").
inline std::string worker_attempt_prefix(int restart_count) {
  return "/worker/attempt_" + std::to_string(restart_count) + "/";
}

// The beat key as the launcher reads it from the store it serves: prefixed by the attempt.
inline std::string beat_in_attempt(int restart_count, int rank) {
  return worker_attempt_prefix(restart_count) + beat(rank);
}

// Where node `node_rank`'s launcher leaves its hang summary of attempt `restart_count`, in the
// store of the job's node 0, so that node 0's report names the stuck node.
inline std::string hang_node_summary(int restart_count, int node_rank) {
  return "/acc/hang/attempt_" + std::to_string(restart_count) + "/node_" +
         std::to_string(node_rank);
}

}  // namespace acc::store_keys
