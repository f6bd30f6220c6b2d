#include "hangs/hang_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "acc/common/strings.h"

namespace acc::launcher {
namespace {

// Ranks grouped by identical stacks, largest group first (then by lowest rank).
std::vector<std::vector<int>> group_by_stack(const std::vector<WorkerSnapshot>& workers) {
  std::map<std::vector<std::string>, std::vector<int>> by_stack;
  for (const WorkerSnapshot& w : workers) by_stack[w.stack.lines].push_back(w.rank);
  std::vector<std::vector<int>> groups;
  for (auto& [lines, ranks] : by_stack) {
    std::sort(ranks.begin(), ranks.end());
    groups.push_back(ranks);
  }
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.size() != b.size() ? a.size() > b.size() : a.front() < b.front();
  });
  return groups;
}

std::vector<int> ranks_except(const std::vector<WorkerSnapshot>& workers,
                              const std::vector<int>& excluded) {
  std::vector<int> ranks;
  for (const WorkerSnapshot& w : workers)
    if (std::find(excluded.begin(), excluded.end(), w.rank) == excluded.end())
      ranks.push_back(w.rank);
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

bool in_collective(const WorkerSnapshot& w) {
  return std::any_of(w.stack.main_thread.begin(), w.stack.main_thread.end(), is_collective_frame);
}

// The outermost lines every stack ends with (stacks are innermost first).
size_t common_suffix_length(const std::vector<const std::vector<std::string>*>& stacks) {
  if (stacks.size() < 2) return 0;
  size_t length = 0;
  for (;; ++length) {
    const auto& first = *stacks.front();
    if (length >= first.size()) return length;
    const std::string& line = first[first.size() - 1 - length];
    for (const auto* stack : stacks)
      if (length >= stack->size() || (*stack)[stack->size() - 1 - length] != line) return length;
  }
}

std::string plural_ranks(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + format_ranks(ranks);
}

// "rank 0 waits", "ranks 0, 1 wait".
std::string ranks_and_verb(const std::vector<int>& ranks, const std::string& verb) {
  return plural_ranks(ranks) + " " + (ranks.size() == 1 ? verb + "s" : verb);
}

std::string headline_end(const HangReport& report, const std::vector<WorkerSnapshot>& workers,
                         const OddOneOut& odd, const std::vector<CollectiveFinding>& findings) {
  if (!findings.empty()) return "; stuck collective: " + describe(findings.front());
  if (!odd.ranks.empty())
    return "; odd one out: " + plural_ranks(odd.ranks) + " (" + odd.reason + ")";
  // Only a job of several nodes has other nodes to look at.
  const std::string elsewhere = report.nnodes > 1 ? " (look at the other nodes)" : "";
  if (workers.size() < 2) return report.nnodes > 1 ? "; one worker on this node" + elsewhere : "";
  return report.nnodes > 1 ? "; no odd one out on this node: its ranks look alike" + elsewhere
                           : "; no odd one out: the ranks look alike";
}

void print_collectives(std::ostringstream& out, const HangReport& report,
                       const std::vector<CollectiveFinding>& findings, const OddOneOut& odd) {
  if (report.traces.empty()) return;
  out << "\ncollectives (each rank's last calls, matched by group and sequence number; "
      << report.traces.size() << (report.traces.size() == 1 ? " trace" : " traces") << "):\n";
  if (findings.empty()) out << "  no collective in flight or in disagreement\n";
  for (const CollectiveFinding& finding : findings) {
    out << "  " << describe(finding) << "\n";
    for (const std::string& line : describe_sides(finding)) out << "  " << line << "\n";
  }
  if (!findings.empty() && !odd.ranks.empty())
    out << "  by the stacks: odd one out " << plural_ranks(odd.ranks) << " (" << odd.reason
        << ")\n";
}

void print_descendants(std::ostringstream& out, const std::vector<WorkerSnapshot>& workers) {
  for (const WorkerSnapshot& w : workers) {
    for (const DescendantSnapshot& d : w.descendants) {
      out << "\nrank " << w.rank << ", its " << (d.parent == w.pid ? "child" : "descendant")
          << " pid " << d.pid << " (" << d.name << ", state " << d.state << ", stack from "
          << d.stack.source << "):\n";
      if (d.stack.lines.empty()) out << "    (no stack)\n";
      for (const std::string& line : d.stack.lines) out << "    " << line << "\n";
    }
  }
}

}  // namespace

bool is_collective_frame(const std::string& frame) {
  // Python frames by their file (a script may well be called all_reduce_test.py), native ones by
  // their namespace or library.
  if (frame.rfind("File \"", 0) == 0) return frame.find("/torch/distributed/") != std::string::npos;
  static const char* const kMarkers[] = {"c10d::", "gloo::", "nccl", "NCCL"};
  return std::any_of(std::begin(kMarkers), std::end(kMarkers),
                     [&](const char* marker) { return frame.find(marker) != std::string::npos; });
}

OddOneOut find_odd_one_out(const std::vector<WorkerSnapshot>& workers) {
  if (workers.size() < 2) return {};
  const auto groups = group_by_stack(workers);
  // A clear majority: one largest group of two or more, bigger than all the others together.
  if (groups.size() > 1 && groups[0].size() >= 2 && groups[0].size() > groups[1].size() &&
      groups[0].size() * 2 > workers.size()) {
    return {ranks_except(workers, groups[0]),
            "its stack differs from " + plural_ranks(groups[0]) + "'s"};
  }
  std::vector<int> waiting, not_waiting;
  for (const WorkerSnapshot& w : workers)
    (in_collective(w) ? waiting : not_waiting).push_back(w.rank);
  if (!waiting.empty() && !not_waiting.empty()) {
    std::sort(not_waiting.begin(), not_waiting.end());
    std::sort(waiting.begin(), waiting.end());
    return {not_waiting,
            "not in a collective, while " + ranks_and_verb(waiting, "wait") + " in one"};
  }
  // Ranks that never printed a line nor beat while others did (a count of lines is no measure of
  // progress beyond that: chatty and quiet ranks differ for no reason).
  std::vector<int> silent, talking;
  for (const WorkerSnapshot& w : workers)
    (w.progress_count == 0 ? silent : talking).push_back(w.rank);
  if (!silent.empty() && !talking.empty()) {
    std::sort(silent.begin(), silent.end());
    return {silent, "made no progress at all, while " + plural_ranks(talking) + " did"};
  }
  return {};
}

std::string format_ranks(const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  const bool contiguous =
      sorted.size() > 2 && sorted.back() - sorted.front() + 1 == static_cast<int>(sorted.size());
  if (contiguous) return std::to_string(sorted.front()) + "-" + std::to_string(sorted.back());
  std::string text;
  for (int rank : sorted) text += (text.empty() ? "" : ", ") + std::to_string(rank);
  return text;
}

std::string format_hang_report(const HangReport& report) {
  std::ostringstream out;
  std::vector<WorkerSnapshot> workers = report.workers;
  std::sort(workers.begin(), workers.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  const OddOneOut odd = find_odd_one_out(workers);
  const std::vector<CollectiveFinding> findings = match_collectives(report.traces);

  out << "acc-launch: hang";
  if (report.stalled_for > 0)
    out << ": no worker on " << report.host << " made progress for " << fixed(report.stalled_for, 1)
        << " s";
  else
    out << " report (on demand) for " << report.host;
  out << headline_end(report, workers, odd, findings) << "\n";

  out << "  rank  local  pid       state  quiet s  cpu s  lines+beats  stack from\n";
  for (const WorkerSnapshot& w : workers) {
    char row[256];
    std::snprintf(
        row, sizeof(row), "  %-5d %-6d %-9d %-6s %-8s %-6s %-12ld %s\n", w.rank, w.local_rank,
        w.pid, w.state.c_str(), fixed(w.seconds_since_progress, 1).c_str(),
        w.cpu_seconds_since_progress < 0 ? "?" : fixed(w.cpu_seconds_since_progress, 2).c_str(),
        w.progress_count, w.stack.source.c_str());
    out << row;
    for (const DescendantSnapshot& d : w.descendants) {
      std::snprintf(row, sizeof(row), "    `-  %-6s %-9d %-6s %s (%s)\n", "", d.pid,
                    d.state.c_str(), d.name.c_str(), d.parent == w.pid ? "child" : "descendant");
      out << row;
    }
  }
  print_collectives(out, report, findings, odd);

  const auto groups = group_by_stack(workers);
  std::map<int, const WorkerSnapshot*> by_rank;
  for (const WorkerSnapshot& w : workers) by_rank[w.rank] = &w;
  std::vector<const std::vector<std::string>*> stacks;
  for (const auto& group : groups) stacks.push_back(&by_rank[group.front()]->stack.lines);
  const size_t common = common_suffix_length(stacks);

  for (const auto& group : groups) {
    const std::vector<std::string>& lines = by_rank[group.front()]->stack.lines;
    out << "\n" << (group.size() == workers.size() ? "all ranks" : plural_ranks(group)) << ":\n";
    if (lines.empty()) out << "    (no stack)\n";
    for (size_t i = 0; i + common < lines.size(); ++i) out << "    " << lines[i] << "\n";
    if (common > 0) out << "    ... (the frames below, common to all ranks)\n";
  }
  if (common > 0) {
    out << "\ncommon to all ranks (outermost):\n";
    const std::vector<std::string>& lines = *stacks.front();
    for (size_t i = lines.size() - common; i < lines.size(); ++i) out << "    " << lines[i] << "\n";
  }
  print_descendants(out, workers);
  for (const std::string& section : report.sections) out << "\n" << section;
  return out.str();
}

}  // namespace acc::launcher
