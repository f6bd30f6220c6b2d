#include "hangs/collective_match.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "acc/common/strings.h"
#include "hangs/hang_report.h"
#include "nodes/store_json.h"

namespace acc::launcher {
namespace {

// Version 1 was tab-separated lines.
constexpr StoreFormat kTraceFormat{"acc-trace", 2};

bool is_point_to_point(const std::string& op) {
  return op == "send" || op == "recv" || op == "isend" || op == "irecv" ||
         op == "batch_isend_irecv";
}

// Whether two ranks' calls under one sequence number are the same collective. Point-to-point
// calls pair a send with a recv; gather and scatter take a list on their root only, so their
// sizes differ by design; a barrier has no tensor of the user's.
bool same_collective(const TracedCall& a, const TracedCall& b) {
  if (is_point_to_point(a.op) || is_point_to_point(b.op))
    return is_point_to_point(a.op) && is_point_to_point(b.op);
  if (a.op != b.op) return false;
  if (a.op == "gather" || a.op == "scatter" || a.op == "barrier") return true;
  return a.numel == b.numel && a.dtype == b.dtype;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + format_ranks(ranks);
}

std::string call_name(const TracedCall& call, bool with_size) {
  std::string name = call.op + " #" + std::to_string(call.seq);
  if (with_size) name += " of " + std::to_string(call.numel) + " " + call.dtype;
  return name;
}

std::string group_phrase(const CollectiveFinding& f) {
  return "(group " + f.group + ", " + std::to_string(f.group_size) +
         (f.group_size == 1 ? " rank)" : " ranks)");
}

// One rank's calls in one group, by sequence number (the latest record of a number wins).
using CallsBySeq = std::map<std::uint64_t, const TracedCall*>;

struct Group {
  int size = 0;
  std::map<int, CallsBySeq> members;  // rank -> its calls in the group
};

std::map<std::string, Group> by_group(const std::vector<RankTrace>& traces) {
  std::map<std::string, Group> groups;
  for (const RankTrace& trace : traces) {
    for (const TracedCall& call : trace.calls) {
      Group& group = groups[call.group];
      group.size = std::max(group.size, call.group_size);
      group.members[trace.rank][call.seq] = &call;
    }
  }
  // Every rank is in the default group; one that issued nothing yet is a member with no calls.
  if (groups.count("default")) {
    for (const RankTrace& trace : traces)
      if (trace.calls.empty()) groups["default"].members[trace.rank];
  }
  return groups;
}

std::optional<CollectiveFinding> find_mismatch(const std::string& name, const Group& group) {
  std::set<std::uint64_t> seqs;
  for (const auto& [rank, calls] : group.members)
    for (const auto& [seq, call] : calls) seqs.insert(seq);
  for (auto seq = seqs.rbegin(); seq != seqs.rend(); ++seq) {
    // The ranks that issued this number, in classes of the same collective.
    std::vector<std::pair<const TracedCall*, std::vector<int>>> classes;
    for (const auto& [rank, calls] : group.members) {
      const auto found = calls.find(*seq);
      if (found == calls.end()) continue;
      auto same = std::find_if(classes.begin(), classes.end(), [&](const auto& c) {
        return same_collective(*c.first, *found->second);
      });
      if (same == classes.end())
        classes.push_back({found->second, {rank}});
      else
        same->second.push_back(rank);
    }
    if (classes.size() < 2) continue;
    // The largest class is what the group expected (on a tie, the class of the lowest rank).
    std::stable_sort(classes.begin(), classes.end(), [](const auto& a, const auto& b) {
      return a.second.size() > b.second.size();
    });
    CollectiveFinding f;
    f.kind = CollectiveFinding::Kind::kMismatch;
    f.group = name;
    f.group_size = group.size;
    f.seq = *seq;
    f.call = *classes[0].first;
    f.ranks = classes[0].second;
    f.odd_call = *classes[1].first;
    for (size_t c = 1; c < classes.size(); ++c)
      f.odd_ranks.insert(f.odd_ranks.end(), classes[c].second.begin(), classes[c].second.end());
    std::sort(f.odd_ranks.begin(), f.odd_ranks.end());
    return f;
  }
  return std::nullopt;
}

std::optional<CollectiveFinding> find_waiting(const std::string& name, const Group& group) {
  std::uint64_t top = 0;
  for (const auto& [rank, calls] : group.members)
    if (!calls.empty()) top = std::max(top, calls.rbegin()->first);
  CollectiveFinding f;
  f.group = name;
  f.group_size = group.size;
  f.seq = top;
  bool first_wait = true;
  for (const auto& [rank, calls] : group.members) {
    const auto found = calls.find(top);
    if (found == calls.end()) {
      f.odd_ranks.push_back(rank);
      if (f.odd_ranks.size() == 1 && !calls.empty()) f.odd_call = *calls.rbegin()->second;
      continue;
    }
    const TracedCall& call = *found->second;
    // Point-to-point calls involve their peer alone: a sequence number does not say who else
    // should have issued them.
    if (!call.in_flight || is_point_to_point(call.op)) return std::nullopt;
    f.ranks.push_back(rank);
    if (first_wait || call.duration < f.waited) f.waited = call.duration;
    if (first_wait) f.call = call;
    first_wait = false;
  }
  if (f.ranks.empty()) return std::nullopt;
  f.kind = f.odd_ranks.empty() ? CollectiveFinding::Kind::kAllWaiting
                               : CollectiveFinding::Kind::kNeverIssued;
  return f;
}

}  // namespace

RankTrace trace_from_snapshot(int rank, const progress_file::Snapshot& snapshot,
                              std::int64_t now_ns, std::size_t max_calls) {
  RankTrace trace;
  trace.rank = rank;
  trace.completed = snapshot.completed;
  trace.in_collective = static_cast<double>(snapshot.in_collective_ns) / 1e9;
  const size_t skip = snapshot.calls.size() > max_calls ? snapshot.calls.size() - max_calls : 0;
  for (size_t i = skip; i < snapshot.calls.size(); ++i) {
    const progress_file::Call& c = snapshot.calls[i];
    TracedCall call;
    call.group = c.group;
    call.seq = c.seq;
    call.op = c.op;
    call.group_size = c.group_size;
    call.peer = c.peer;
    call.numel = c.numel;
    call.dtype = c.dtype;
    call.where = c.where;
    call.in_flight = c.in_flight();
    call.age = std::max(0.0, static_cast<double>(now_ns - c.start_ns) / 1e9);
    call.duration =
        std::max(0.0, static_cast<double>((call.in_flight ? now_ns : c.end_ns) - c.start_ns) / 1e9);
    trace.calls.push_back(std::move(call));
  }
  return trace;
}

// Each field under its own name; the format's tag is store_json.h's.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TracedCall, group, seq, op, group_size, peer, numel, dtype,
                                   where, age, duration, in_flight)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankTrace, rank, completed, in_collective, calls)

std::string encode_trace(const RankTrace& trace) {
  return to_store_json(trace, kTraceFormat);
}

std::optional<RankTrace> decode_trace(const std::string& text) {
  return from_store_json<RankTrace>(text, kTraceFormat);
}

std::vector<CollectiveFinding> match_collectives(const std::vector<RankTrace>& traces) {
  std::vector<CollectiveFinding> findings;
  for (const auto& [name, group] : by_group(traces)) {
    if (auto mismatch = find_mismatch(name, group)) {
      findings.push_back(std::move(*mismatch));
    } else if (auto waiting = find_waiting(name, group)) {
      findings.push_back(std::move(*waiting));
    }
  }
  std::stable_sort(findings.begin(), findings.end(), [](const auto& a, const auto& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.waited > b.waited;
  });
  return findings;
}

std::string describe(const CollectiveFinding& f) {
  switch (f.kind) {
    case CollectiveFinding::Kind::kMismatch: {
      // The sizes tell the calls apart only where the ops are the same.
      const bool sizes = f.odd_call.op == f.call.op;
      return ranks_phrase(f.odd_ranks) + " issued " + call_name(f.odd_call, sizes) + " where " +
             ranks_phrase(f.ranks) + " issued " + call_name(f.call, sizes) + " " + group_phrase(f);
    }
    case CollectiveFinding::Kind::kNeverIssued:
      return ranks_phrase(f.odd_ranks) + " never issued " + call_name(f.call, false) + " " +
             group_phrase(f) + "; " + ranks_phrase(f.ranks) +
             (f.ranks.size() == 1 ? " has" : " have") + " waited in it for " + fixed(f.waited, 1) +
             " s";
    case CollectiveFinding::Kind::kAllWaiting:
      return (f.ranks.size() == 1 ? "rank " + format_ranks(f.ranks) + " waits"
                                  : "ranks " + format_ranks(f.ranks) + " all wait") +
             " in " + call_name(f.call, false) + " " + group_phrase(f) + " for " +
             fixed(f.waited, 1) +
             " s, which every rank issued: the collective itself does not complete";
  }
  return "";
}

std::vector<std::string> describe_sides(const CollectiveFinding& f) {
  auto where = [](const TracedCall& call) {
    return call_name(call, false) + " at " + (call.where.empty() ? "?" : call.where) +
           (call.in_flight ? ", waiting for " + fixed(call.duration, 1) + " s"
                           : ", completed " + fixed(call.age - call.duration, 1) + " s ago");
  };
  std::vector<std::string> lines;
  if (!f.ranks.empty()) lines.push_back("  " + ranks_phrase(f.ranks) + ": " + where(f.call));
  if (f.kind == CollectiveFinding::Kind::kMismatch) {
    lines.push_back("  " + ranks_phrase(f.odd_ranks) + ": " + where(f.odd_call));
  } else if (f.kind == CollectiveFinding::Kind::kNeverIssued) {
    if (f.odd_call.op.empty())
      lines.push_back("  " + ranks_phrase(f.odd_ranks) + ": no call in group " + f.group + " yet");
    else
      lines.push_back("  " + ranks_phrase({f.odd_ranks.front()}) + ", its last call in group " +
                      f.group + ": " + where(f.odd_call));
  }
  return lines;
}

}  // namespace acc::launcher
