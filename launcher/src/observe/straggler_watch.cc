#include "observe/straggler_watch.h"

#include "acc/common/progress_file.h"
#include "observe/trace_gather.h"

namespace acc::launcher {

StragglerWatch::StragglerWatch(std::vector<Rank> ranks, std::chrono::milliseconds window,
                               Clock::time_point now)
    : ranks_(std::move(ranks)),
      window_(window),
      next_tick_(window.count() > 0 ? now + window : Clock::time_point::max()),
      readers_(ranks_.size()),
      last_(ranks_.size()),
      totals_(ranks_.size()) {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    totals_[i].rank = ranks_[i].rank;
    last_[i] = sample(i);
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
      const std::string path = progress_file_of(ranks_[index].pid);
      if (path.empty()) return s;
      readers_[index] = std::make_unique<progress_file::Reader>(path);
    }
    // The whole ring only when a call is in flight: its wait so far belongs to this window.
    progress_file::Snapshot snapshot = readers_[index]->snapshot(false);
    s.at_ns = progress_file::now_ns();
    if (snapshot.started > snapshot.completed) snapshot = readers_[index]->snapshot(true);
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

std::string StragglerWatch::tick(Clock::time_point now) {
  if (now < next_tick_) return "";
  next_tick_ = now + window_;
  std::vector<RankTiming> window;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Sample s = sample(i);
    if (s.ok && last_[i].ok && s.completed > last_[i].completed) {
      RankTiming t;
      t.rank = ranks_[i].rank;
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
  const StragglerFinding finding = find_stragglers(window);
  if (finding.ranks == named_) return "";
  named_ = finding.ranks;
  if (finding.ranks.empty()) return "";
  named_any_ = true;
  return describe_stragglers(finding, std::chrono::duration<double>(window_).count());
}

StragglerFinding StragglerWatch::whole_run() const {
  return find_stragglers(totals_);
}

}  // namespace acc::launcher
