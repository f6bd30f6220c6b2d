#include "hangs/straggler_watch.h"

#include "acc/common/progress_file.h"

namespace acc::launcher {

StragglerWatch::StragglerWatch(std::vector<Rank> ranks, std::chrono::milliseconds window,
                               Clock::time_point now, int node, std::string host, Exchange exchange)
    : ranks_(std::move(ranks)),
      window_(window),
      node_(node),
      host_(std::move(host)),
      exchange_(std::move(exchange)),
      next_tick_(window.count() > 0 ? now + window : Clock::time_point::max()),
      readers_(ranks_.size()),
      last_(ranks_.size()),
      totals_(ranks_.size()) {
  // No sample yet: a rank's clock starts at its first completed collective (tick()), which a
  // progress file made for this attempt has not had. The files are mapped at the first tick.
  for (size_t i = 0; i < ranks_.size(); ++i) {
    totals_[i].rank = ranks_[i].rank;
    totals_[i].node = node_;
  }
}

StragglerWatch::~StragglerWatch() = default;

StragglerWatch::Clock::time_point StragglerWatch::next_tick() const {
  return next_tick_;
}

StragglerWatch::Sample StragglerWatch::sample(size_t index) {
  Sample s;
  try {
    if (!readers_[index]) {
      readers_[index] = std::make_unique<progress_file::Reader>(ranks_[index].progress_file);
    }
    // The whole ring only when a call is in flight: its wait so far belongs to this window.
    progress_file::Snapshot snapshot = readers_[index]->snapshot(0);
    s.at_ns = progress_file::now_ns();
    if (snapshot.started > snapshot.completed) snapshot = readers_[index]->snapshot();
    s.ok = true;
    s.completed = snapshot.completed;
    s.in_collective = static_cast<double>(snapshot.in_collective_ns) / 1e9;
    if (!snapshot.calls.empty() && snapshot.calls.back().in_flight())
      s.in_collective += static_cast<double>(s.at_ns - snapshot.calls.back().start_ns) / 1e9;
  } catch (const std::exception&) {
    // No file (yet): this rank has no timing in this window.
  }
  return s;
}

std::vector<std::string> StragglerWatch::tick(Clock::time_point now) {
  if (now < next_tick_) return {};
  next_tick_ = now + window_;
  ++ticks_;
  std::vector<RankTiming> window;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Sample s = sample(i);
    // A rank's clock starts at its first completed collective: the window before it holds the
    // start-up (imports, init_process_group), which is no one's compute per step.
    if (s.ok && last_[i].ok && last_[i].completed > 0 && s.completed > last_[i].completed) {
      RankTiming t;
      t.rank = ranks_[i].rank;
      t.node = node_;
      t.steps = s.completed - last_[i].completed;
      t.window = static_cast<double>(s.at_ns - last_[i].at_ns) / 1e9;
      t.in_collective = std::max(0.0, s.in_collective - last_[i].in_collective);
      window.push_back(t);
      totals_[i].steps += t.steps;
      totals_[i].window += t.window;
      totals_[i].in_collective += t.in_collective;
    }
    if (s.ok) last_[i] = s;
  }
  if (exchange_) {
    NodeTimings mine{node_, host_, ticks_, window, totals_};
    const std::optional<std::vector<NodeTimings>> others = exchange_(mine);
    if (!others) return {};  // node 0 judges the job
    for (const NodeTimings& timings : *others) {
      if (timings.node == node_) continue;
      auto [at, inserted] = others_.try_emplace(timings.node);
      if (inserted || at->second.timings.sequence != timings.sequence) {
        at->second.timings = timings;
        at->second.seen_at_tick = ticks_;
      }
    }
    window = with_other_nodes(std::move(window));
  }
  const StragglerFinding finding = find_stragglers(window);
  if (finding.ranks == named_ && finding.nodes == named_nodes_) return {};
  named_ = finding.ranks;
  named_nodes_ = finding.nodes;
  if (finding.empty()) return {};
  named_any_ = true;
  std::map<int, std::string> hosts{{node_, host_}};
  for (const auto& [node, other] : others_) hosts[node] = other.timings.host;
  return describe_stragglers(finding, std::chrono::duration<double>(window_).count(), hosts);
}

// A node's window counts while it is no older than the two latest of node 0's: the nodes' windows
// end at different moments, so one may not have ended since node 0's last tick.
std::vector<RankTiming> StragglerWatch::with_other_nodes(std::vector<RankTiming> window) {
  for (const auto& [node, other] : others_)
    if (ticks_ - other.seen_at_tick <= 1)
      window.insert(window.end(), other.timings.window.begin(), other.timings.window.end());
  return window;
}

StragglerFinding StragglerWatch::whole_run() const {
  std::vector<RankTiming> totals = totals_;
  for (const auto& [node, other] : others_)
    totals.insert(totals.end(), other.timings.totals.begin(), other.timings.totals.end());
  return find_stragglers(totals);
}

}  // namespace acc::launcher
