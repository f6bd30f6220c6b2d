#include "hangs/stragglers.h"

#include <algorithm>
#include <cstdio>

#include "acc/common/strings.h"
#include "hangs/hang_report.h"
#include "nodes/store_json.h"

namespace acc::launcher {
namespace {

// Version 1 was lines of text.
constexpr StoreFormat kNodeTimingsFormat{"acc-stragglers", 2};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

double RankTiming::compute_per_step() const {
  return steps == 0 ? 0 : std::max(0.0, window - in_collective) / static_cast<double>(steps);
}

double RankTiming::wait_per_step() const {
  return steps == 0 ? 0 : in_collective / static_cast<double>(steps);
}

namespace {

bool contains(const std::vector<int>& values, int value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// Each node's fastest rank's compute per step: a node whose fastest rank is slow is slow as a
// whole (one slow rank among fast ones is a rank straggler, not a node one).
std::map<int, double> node_compute(const std::vector<RankTiming>& timings) {
  std::map<int, double> fastest;
  for (const RankTiming& t : timings) {
    const auto [at, inserted] = fastest.emplace(t.node, t.compute_per_step());
    if (!inserted) at->second = std::min(at->second, t.compute_per_step());
  }
  return fastest;
}

// The median of the nodes other than `node`.
double others_median(const std::map<int, double>& nodes, int node) {
  std::vector<double> others;
  for (const auto& [n, compute] : nodes)
    if (n != node) others.push_back(compute);
  return median(others);
}

bool slower(double compute, double reference) {
  return compute > kStragglerFactor * reference && compute - reference >= kStragglerMinExcess;
}

std::string steps_text(std::uint64_t steps) {
  return std::to_string(steps) + (steps == 1 ? " step" : " steps");
}

}  // namespace

StragglerFinding find_stragglers(std::vector<RankTiming> timings) {
  StragglerFinding finding;
  for (const RankTiming& t : timings)
    if (t.steps > 0) finding.timings.push_back(t);
  std::sort(finding.timings.begin(), finding.timings.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  if (finding.timings.size() < 2) return finding;
  std::vector<double> compute;
  for (const RankTiming& t : finding.timings) compute.push_back(t.compute_per_step());
  finding.median_compute = median(compute);
  const std::map<int, double> nodes = node_compute(finding.timings);
  if (nodes.size() >= 2)
    for (const auto& [node, fastest] : nodes)
      if (slower(fastest, others_median(nodes, node))) finding.nodes.push_back(node);
  for (const RankTiming& t : finding.timings)
    if (!contains(finding.nodes, t.node) && slower(t.compute_per_step(), finding.median_compute))
      finding.ranks.push_back(t.rank);
  return finding;
}

std::vector<std::string> describe_stragglers(const StragglerFinding& finding, double window,
                                             const std::map<int, std::string>& hosts) {
  std::vector<std::string> lines;
  const std::string window_text = "window " + fixed(window, 0) + " s, ";
  const std::map<int, double> nodes = node_compute(finding.timings);
  for (int node : finding.nodes) {
    std::uint64_t steps = 0;
    double others_wait = 0;
    int others = 0;
    for (const RankTiming& t : finding.timings) {
      if (t.node == node) {
        steps = std::max(steps, t.steps);
      } else if (!contains(finding.nodes, t.node)) {
        others_wait += t.wait_per_step();
        ++others;
      }
    }
    const auto host = hosts.find(node);
    std::string text =
        "node " + std::to_string(node) +
        (host != hosts.end() && !host->second.empty() ? " (" + host->second + ")" : "") +
        " is a straggler: its ranks compute at least " + fixed(nodes.at(node), 2) +
        " s per step against " + fixed(others_median(nodes, node), 2) + " s on the other nodes";
    if (others > 0)
      text +=
          "; the other nodes' ranks wait " + fixed(others_wait / others, 2) + " s per step for it";
    lines.push_back(text + " (" + window_text + steps_text(steps) + ")");
  }
  if (finding.ranks.empty()) return lines;
  double slowest = 0, others_wait = 0;
  std::uint64_t steps = 0;
  int others = 0;
  for (const RankTiming& t : finding.timings) {
    if (contains(finding.ranks, t.rank)) {
      slowest = std::max(slowest, t.compute_per_step());
      steps = std::max(steps, t.steps);
    } else if (!contains(finding.nodes, t.node)) {
      others_wait += t.wait_per_step();
      ++others;
    }
  }
  const bool one = finding.ranks.size() == 1;
  std::string text = (one ? "rank " : "ranks ") + format_ranks(finding.ranks) +
                     (one ? " is a straggler: " : " are stragglers: ") + fixed(slowest, 2) +
                     " s of compute per step against a median of " +
                     fixed(finding.median_compute, 2) + " s";
  if (others > 0)
    text += "; the other ranks wait " + fixed(others_wait / others, 2) + " s per step for " +
            (one ? "it" : "them");
  lines.push_back(text + " (" + window_text + steps_text(steps) + ")");
  return lines;
}

std::string format_straggler_table(const StragglerFinding& finding) {
  if (finding.timings.empty()) return "";
  const bool by_node = node_compute(finding.timings).size() > 1;
  std::string text =
      std::string("  rank  ") + (by_node ? "node  " : "") + "steps   compute s/step  wait s/step\n";
  for (const RankTiming& t : finding.timings) {
    const bool straggler = contains(finding.ranks, t.rank) || contains(finding.nodes, t.node);
    char row[160];
    std::snprintf(row, sizeof(row), "  %-5d ", t.rank);
    text += row;
    if (by_node) {
      std::snprintf(row, sizeof(row), "%-5d ", t.node);
      text += row;
    }
    std::snprintf(row, sizeof(row),
                  straggler ? "%-7llu %-15s %-11s  <- straggler\n" : "%-7llu %-15s %s\n",
                  static_cast<unsigned long long>(t.steps), fixed(t.compute_per_step(), 3).c_str(),
                  fixed(t.wait_per_step(), 3).c_str());
    text += row;
  }
  return text;
}

// A rank's timing without its node: NodeTimings names the node once, for all its ranks.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankTiming, rank, steps, window, in_collective)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NodeTimings, node, host, sequence, window, totals)

std::string encode_node_timings(const NodeTimings& timings) {
  return to_store_json(timings, kNodeTimingsFormat);
}

std::optional<NodeTimings> decode_node_timings(const std::string& text) {
  std::optional<NodeTimings> timings = from_store_json<NodeTimings>(text, kNodeTimingsFormat);
  if (!timings) return std::nullopt;
  for (auto* list : {&timings->window, &timings->totals})
    for (RankTiming& t : *list) t.node = timings->node;
  return timings;
}

}  // namespace acc::launcher
