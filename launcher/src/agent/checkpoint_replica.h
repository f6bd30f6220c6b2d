#pragma once

// --checkpoint_replica (docs/checkpoints.md, "A replica on another node"): each node's launcher
// also holds the newest acc_launch.checkpoint save of each rank of the node before it in the
// round's ring (node n holds node n - 1's, node 0 the last node's), so that a node lost keeps its
// checkpoint. Where a later round gives this node a rank whose save it holds as a replica, newer
// than its memory's own, the replica takes that rank's place in the memory before the workers
// start: they load it as a save of their own, and this node's checkpoint helper writes it to
// storage where the rank is 0.
//
// The copies are made by two helpers, copies of acc-launch (replica_transfer.cc), at nice 10:
//   `receive`, for the whole job: listens on this node's address (its port in the round's store,
//     <prefix>replica/<node>) and takes the saves that the node before it sends into
//     MEMORY/replica/ (rank<R>.data and rank<R>.<seq>.meta: one save per rank, two while one
//     comes in), from a sender that proves the job secret;
//   `send`, one copy at a time: the newest save of each of this node's ranks to the next node,
//     each kept there only where it was still committed here once sent. A new one starts when a
//     copy is done and this node's ranks have saved since.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "acc/launcher/nodes/membership.h"
#include "process/os.h"

namespace acc::launcher {

inline constexpr const char* kReplicaCommand = "__checkpoint_replica";
inline constexpr char kReplicaDir[] = "replica";
inline constexpr char kReplicaLock[] = "lock";
inline constexpr char kReplicaSecret[] = "replica.secret";
inline constexpr char kReplicaAddress[] = "replica.address";

// `acc-launch __checkpoint_replica receive MEMORY HOST PARENT` or `send MEMORY HOST:PORT PARENT
// RANK...`: the exit status; a line on stdout where it fails. A send whose copy of a save was
// overwritten here before it was whole there (the next save reused its slot) exits
// kReplicaOverwritten, and the receiver keeps the one it had.
inline constexpr int kReplicaOverwritten = 3;
int run_replica_helper(const std::vector<std::string>& args);

// The newest save of `rank` committed in `dir` (rank<R>.<seq>.meta), 0 for none; its file name.
long newest_rank_save(const std::string& dir, int rank);
std::string rank_meta_name(int rank, long seq);

class CheckpointReplica {
 public:
  using Clock = std::chrono::steady_clock;
  using Notice = std::function<void(const std::string&)>;

  // Starts the receiver for the memory `memory` (CheckpointMemory's), on `host` (this node as the
  // others reach it); `secret` the job secret ("" for none).
  CheckpointReplica(Os& os, std::string memory, const std::string& host, const std::string& secret,
                    Notice notice);
  // The helpers are stopped (SIGTERM).
  ~CheckpointReplica();
  CheckpointReplica(const CheckpointReplica&) = delete;
  CheckpointReplica& operator=(const CheckpointReplica&) = delete;

  // Before an attempt's workers start: `round` the round they start in (its store valid until the
  // next join), `ranks` this node's global ranks in it. The replica takes the place of each of
  // `ranks` whose save it holds newer than the memory's own; a copy still under way to the last
  // round's next node is stopped.
  void attempt_starts(const RoundStore& round, const std::vector<int>& ranks);
  // Publishes the receiver's address, finds the next node's, and starts a copy where this node's
  // ranks saved since the last one and none runs; a helper's failure in one line (once). Never
  // blocks but for the store's round trips.
  void tick();
  // When tick() wants calling; nullopt: never (one node).
  std::optional<Clock::time_point> next_wake() const;

 private:
  // The saves of `ranks` the replica holds, moved into the memory; the ranks moved.
  std::vector<int> take_places(const std::vector<int>& ranks);
  void check_helpers();
  void say_lines(const std::string& log);

  Os& os_;
  std::string memory_;
  std::string launcher_;  // acc-launch itself
  Notice notice_;
  pid_t receiver_ = -1;
  pid_t sender_ = -1;
  RoundStore round_;
  std::vector<int> ranks_;
  bool published_ = false;
  std::string next_node_;          // the next node's receiver, "host:port"; "" not known yet
  std::vector<long> sent_;         // per rank of ranks_: the newest save copied
  std::vector<long> sending_;      // and the newest when the running copy started
  int overwritten_ = 0;            // copies in a row overwritten before they were whole
  std::vector<std::string> said_;  // the helpers' lines noticed
};

}  // namespace acc::launcher
