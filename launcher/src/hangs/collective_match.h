#pragma once

// The stuck collective, named from the ranks' collective traces (progress_file.h): each rank's
// last calls, matched across ranks by (process group, sequence number), as PyTorch's Flight
// Recorder analyzer matches them. Pure: stall_watch.cc gathers the traces (across nodes through
// node 0's store, in the JSON encoding below) and hang_report.cc prints what match_collectives()
// finds.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "acc/common/progress_file.h"

namespace acc::launcher {

// One collective or point-to-point call as another machine can read it: its times are ages (the
// seconds before the trace was taken), since monotonic clocks of two machines do not compare.
struct TracedCall {
  std::string group;  // "default", ...
  std::uint64_t seq = 0;
  std::string op;
  int group_size = 0;
  int peer = -1;
  std::uint64_t numel = 0;
  std::string dtype;
  std::string where;       // the caller's "file.py:123"
  double age = 0;          // seconds since it started
  double duration = 0;     // seconds it took; while in flight, how long it has been waiting
  bool in_flight = false;  // not completed when the trace was taken
};

// One rank's trace: its last calls, oldest first.
struct RankTrace {
  int rank = 0;
  std::uint64_t completed = 0;  // collectives completed so far
  double in_collective = 0;     // seconds spent inside completed ones
  std::vector<TracedCall> calls;
};

// The rank's trace from a look at its progress file taken at `now_ns` on that file's clock:
// its last `max_calls` calls.
RankTrace trace_from_snapshot(int rank, const progress_file::Snapshot& snapshot,
                              std::int64_t now_ns, std::size_t max_calls = 32);

// What a launcher puts under store_keys::collective_trace(attempt, rank): one line of JSON
// (nodes/store_json.h), {"calls":[{"age":3.5,"dtype":"float32","duration":1.25,"group":"default",
// "group_size":4,"in_flight":true,"numel":1024,"op":"all_reduce","peer":-1,"seq":58,
// "where":"train.py:12"}],"completed":57,"format":"acc-trace","in_collective":12.5,"rank":3,
// "version":2}; every field as it is, tabs and newlines included.
std::string encode_trace(const RankTrace& trace);
// The trace encode_trace() wrote; nullopt for anything else (another format or version, a torn
// value, a field missing or of another type).
std::optional<RankTrace> decode_trace(const std::string& text);

// What the traces say of one process group.
struct CollectiveFinding {
  enum class Kind {
    kMismatch,     // ranks issued different collectives under one sequence number
    kNeverIssued,  // some ranks wait in a collective that others never issued
    kAllWaiting,   // every rank waits in the same collective: it is the collective that hangs
  };
  Kind kind = Kind::kAllWaiting;
  std::string group;
  int group_size = 0;
  std::uint64_t seq = 0;
  // kMismatch: the odd ranks and their call; kNeverIssued: the ranks that never issued it, with
  // their last call in the group (op empty when they issued none).
  std::vector<int> odd_ranks;
  TracedCall odd_call;
  // The ranks that issued the expected call (the majority's, or the one waited in) and that call.
  std::vector<int> ranks;
  TracedCall call;
  double waited = 0;  // seconds the waiting ranks have waited in `call` (the shortest wait)
};

// Every finding, the most telling first (mismatches, then collectives never issued, then
// collectives all ranks wait in); empty when no trace holds a collective in flight or in
// disagreement. A rank whose trace holds no call at all still counts as a member of the default
// group: every rank of a job belongs to it, so a rank that has issued nothing yet never issued
// the collective the others wait in.
std::vector<CollectiveFinding> match_collectives(const std::vector<RankTrace>& traces);

// "rank 1 issued broadcast #57 where ranks 0, 2, 3 issued all_reduce #57 (group default, 4
// ranks)", "rank 2 never issued all_reduce #58; ranks 0, 1, 3 have waited in it for 312.0 s".
std::string describe(const CollectiveFinding& finding);

// The lines under the headline: where each side issued its call (file:line), indented.
std::vector<std::string> describe_sides(const CollectiveFinding& finding);

}  // namespace acc::launcher
