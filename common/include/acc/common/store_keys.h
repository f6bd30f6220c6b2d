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

// The key space (StoreServer::begin_key_space) of the workers of a static job's attempt
// `restart_count`, in the store its node 0 serves: PyTorch 2.x's workers no longer prefix
// their keys by attempt, so each attempt's keys live apart from the last attempt's.
inline std::string worker_key_space(int restart_count) {
  return "/acc/space/attempt_" + std::to_string(restart_count) + "/";
}

// Where node `node_rank`'s launcher leaves its hang summary of attempt `restart_count`, in the
// store of the job's node 0, so that node 0's report names the stuck node.
inline std::string hang_node_summary(int restart_count, int node_rank) {
  return "/acc/hang/attempt_" + std::to_string(restart_count) + "/node_" +
         std::to_string(node_rank);
}

// --- the launchers of one job, in the store of its node 0 ---------------------------------------
// Every launcher of the job is a client of node 0's store (static: the store node 0's launcher
// serves; elastic: the rendezvous store). One layout for the job's life:
//   /acc/job/node_<n>/alive          node n's launcher adds 1 at each keep-alive tick
//   /acc/job/node_<n>/let_go         node n (n > 0) is done with the store: it read the job's end
//                                    or passed the exit barrier (node 0 may close the store)
//   /acc/job/end                     the first launcher to end the job sets it (compare_set from
//                                    absent) to one JSON object naming the node, host, rank, exit
//                                    and reason; every other launcher stops on seeing it
//   /acc/job/restart                 the restart count every node moves to (compare_set k -> k+1)
//   /acc/job/attempt_<k>/arrived     the attempt barrier: each node adds 1 before attempt k
//   /acc/job/attempt_<k>/ready       set by the last node to arrive at attempt k's barrier, or by
//                                    a node that ends the job before attempt k starts
//   /acc/job/attempt_<k>/over        set when nothing more happens in attempt k: a node moves the
//                                    job past it, ends the job, or is the last to arrive at the
//                                    exit barrier. The nodes wait on these two keys (a store WAIT,
//                                    an event) rather than looking at the counters in turn.
//   /acc/job/exit/arrived            the exit barrier: each node adds 1 when its workers are done
//   /acc/trace/attempt_<k>/rank_<r>  rank r's collective trace (progress_file.h), put by its
//                                    node's launcher when a hang report is built
//   /acc/hang/attempt_<k>/node_<n>   node n's one-line hang summary (above)
//   /acc/network_check/...          a static job's --network_check before its first attempt: each
//                                    node's probe address and measures (network_probe.h)
//   /acc/stragglers/attempt_<k>/node_<n>
//                                    node n's ranks' collective timing over its latest straggler
//                                    window and the attempt so far (overwritten each window), for
//                                    node 0 to name slow ranks and nodes across the job

inline std::string network_check_prefix() {
  return "/acc/network_check/";
}

inline std::string node_alive(int node_rank) {
  return "/acc/job/node_" + std::to_string(node_rank) + "/alive";
}

inline std::string node_let_go(int node_rank) {
  return "/acc/job/node_" + std::to_string(node_rank) + "/let_go";
}

inline std::string job_end() {
  return "/acc/job/end";
}

inline std::string job_restart() {
  return "/acc/job/restart";
}

// How many of the job's restarts --max_restarts does not count (--sdc_exit_codes), an ADD counter.
inline std::string restarts_not_counted() {
  return "/acc/job/restarts_not_counted";
}

inline std::string attempt_barrier(int restart_count) {
  return "/acc/job/attempt_" + std::to_string(restart_count) + "/arrived";
}

inline std::string attempt_ready(int restart_count) {
  return "/acc/job/attempt_" + std::to_string(restart_count) + "/ready";
}

inline std::string attempt_over(int restart_count) {
  return "/acc/job/attempt_" + std::to_string(restart_count) + "/over";
}

inline std::string exit_barrier() {
  return "/acc/job/exit/arrived";
}

inline std::string collective_trace(int restart_count, int rank) {
  return "/acc/trace/attempt_" + std::to_string(restart_count) + "/rank_" + std::to_string(rank);
}

inline std::string straggler_timings(int restart_count, int node_rank) {
  return "/acc/stragglers/attempt_" + std::to_string(restart_count) + "/node_" +
         std::to_string(node_rank);
}

// Node `node_rank`'s status (--status_port) as JSON, which node 0's status server shows with its
// own.
inline std::string job_status(int restart_count, int node_rank) {
  return "/acc/status/attempt_" + std::to_string(restart_count) + "/node_" +
         std::to_string(node_rank);
}

}  // namespace acc::store_keys
