#include "observe/stragglers.h"

#include <algorithm>
#include <cstdio>

#include "observe/hang_report.h"

namespace acc::launcher {
namespace {

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

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
  for (const RankTiming& t : finding.timings) {
    const double c = t.compute_per_step();
    if (c > kStragglerFactor * finding.median_compute &&
        c - finding.median_compute >= kStragglerMinExcess)
      finding.ranks.push_back(t.rank);
  }
  return finding;
}

std::string describe_stragglers(const StragglerFinding& finding, double window) {
  if (finding.ranks.empty()) return "";
  double slowest = 0, others_wait = 0;
  std::uint64_t steps = 0;
  int others = 0;
  for (const RankTiming& t : finding.timings) {
    const bool straggler =
        std::find(finding.ranks.begin(), finding.ranks.end(), t.rank) != finding.ranks.end();
    if (straggler) {
      slowest = std::max(slowest, t.compute_per_step());
      steps = std::max(steps, t.steps);
    } else {
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
  return text + " (window " + fixed(window, 0) + " s, " + std::to_string(steps) +
         (steps == 1 ? " step)" : " steps)");
}

std::string format_straggler_table(const StragglerFinding& finding) {
  if (finding.timings.empty()) return "";
  std::string text = "  rank  steps   compute s/step  wait s/step\n";
  for (const RankTiming& t : finding.timings) {
    const bool straggler =
        std::find(finding.ranks.begin(), finding.ranks.end(), t.rank) != finding.ranks.end();
    char row[160];
    std::snprintf(
        row, sizeof(row),
        straggler ? "  %-5d %-7llu %-15s %-11s  <- straggler\n" : "  %-5d %-7llu %-15s %s\n",
        t.rank, static_cast<unsigned long long>(t.steps), fixed(t.compute_per_step(), 3).c_str(),
        fixed(t.wait_per_step(), 3).c_str());
    text += row;
  }
  return text;
}

}  // namespace acc::launcher
