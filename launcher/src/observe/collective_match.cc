#include "observe/collective_match.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "acc/common/strings.h"
#include "observe/hang_report.h"

namespace acc::launcher {
namespace {

constexpr char kTraceMagic[] = "acc-trace";
constexpr int kTraceVersion = 1;

std::string clean(std::string field) {
  for (char& c : field)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return field;
}

std::vector<std::string> split(const std::string& line, char separator) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, separator)) fields.push_back(field);
  if (!line.empty() && line.back() == separator) fields.emplace_back();
  return fields;
}

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

std::string encode_trace(const RankTrace& trace) {
  std::string text = std::string(kTraceMagic) + " " + std::to_string(kTraceVersion) + " " +
                     std::to_string(trace.rank) + " " + std::to_string(trace.completed) + " " +
                     fixed(trace.in_collective, 6) + "\n";
  for (const TracedCall& c : trace.calls) {
    text += clean(c.group) + "\t" + std::to_string(c.seq) + "\t" + clean(c.op) + "\t" +
            std::to_string(c.group_size) + "\t" + std::to_string(c.peer) + "\t" +
            std::to_string(c.numel) + "\t" + clean(c.dtype) + "\t" + clean(c.where) + "\t" +
            fixed(c.age, 3) + "\t" + fixed(c.duration, 3) + "\t" + (c.in_flight ? "1" : "0") + "\n";
  }
  return text;
}

std::optional<RankTrace> decode_trace(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  std::istringstream header(line);
  std::string magic;
  int version = 0;
  RankTrace trace;
  if (!(header >> magic >> version >> trace.rank >> trace.completed >> trace.in_collective) ||
      magic != kTraceMagic || version != kTraceVersion)
    return std::nullopt;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split(line, '\t');
    if (f.size() != 11) return std::nullopt;
    TracedCall c;
    char* end = nullptr;
    c.group = f[0];
    c.seq = std::strtoull(f[1].c_str(), &end, 10);
    c.op = f[2];
    c.group_size = std::atoi(f[3].c_str());
    c.peer = std::atoi(f[4].c_str());
    c.numel = std::strtoull(f[5].c_str(), &end, 10);
    c.dtype = f[6];
    c.where = f[7];
    c.age = std::strtod(f[8].c_str(), &end);
    c.duration = std::strtod(f[9].c_str(), &end);
    c.in_flight = f[10] == "1";
    trace.calls.push_back(std::move(c));
  }
  return trace;
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
