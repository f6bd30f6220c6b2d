#include "agent/recoveries.h"

#include <cstdio>

#include "acc/common/error.h"
#include "acc/common/progress_file.h"
#include "agent/worker_group.h"
#include "hangs/python_stack_hook.h"

namespace acc::launcher {
namespace {

double seconds_between(Os::Clock::time_point from, Os::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

std::optional<RecoveryStatus> Recoveries::attempt_started(int attempt, Clock::time_point at) {
  failure_seen_.reset();
  attempt_started_ = at;
  if (!first_started_) first_started_ = at;
  if (!pending_) return std::nullopt;
  RecoveryStatus r;
  r.attempt = attempt + 1;
  r.cause = pending_->cause;
  r.stop_seconds = seconds_between(pending_->seen, pending_->stopped);
  r.rendezvous_seconds = seconds_between(pending_->stopped, pending_->joined);
  r.spawn_seconds = seconds_between(pending_->joined, at);
  r.seconds = seconds_between(pending_->seen, at);
  pending_.reset();
  recoveries_.push_back(r);
  goodput_.recovery_seconds += r.seconds;
  goodput_.lost_seconds += r.seconds;
  return r;
}

void Recoveries::failure_seen(Clock::time_point at) {
  if (!failure_seen_) failure_seen_ = at;
}

const GoodputStatus& Recoveries::attempt_ended(Clock::time_point at, bool made_progress) {
  attempt_ended_ = at;
  const double seconds = seconds_between(attempt_started_, at);
  if (made_progress) {
    goodput_.progress_seconds += seconds;
  } else {
    goodput_.lost_seconds += seconds;
  }
  goodput_.wall_seconds = seconds_between(*first_started_, at);
  return goodput_;
}

// The recovery runs from the failure this node saw (or, when it saw none, its workers' end) until
// the next attempt's spawn.
void Recoveries::begin(const std::string& cause) {
  pending_ = Pending{failure_seen_.value_or(attempt_ended_), attempt_ended_, attempt_ended_, cause};
}

void Recoveries::joined(Clock::time_point at) {
  if (pending_) pending_->joined = at;
}

std::vector<std::string> Recoveries::summary() const {
  std::vector<std::string> lines;
  for (const RecoveryStatus& r : recoveries_)
    lines.push_back("recovery " + describe(r) + "; cause: " + r.cause);
  char line[160];
  std::snprintf(
      line, sizeof(line),
      "goodput: %.1f%% of %.2f s in attempts that made progress; %.3f s in %zu "
      "recoveries; %.2f s lost",
      goodput_.wall_seconds > 0 ? 100.0 * goodput_.progress_seconds / goodput_.wall_seconds : 0.0,
      goodput_.wall_seconds, goodput_.recovery_seconds, recoveries_.size(), goodput_.lost_seconds);
  lines.push_back(line);
  return lines;
}

std::string Recoveries::describe(const RecoveryStatus& r) {
  const auto ms = [](double seconds) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.1f ms", seconds * 1000);
    return std::string(text);
  };
  return "attempt " + std::to_string(r.attempt) + " started " + ms(r.seconds) +
         " after the failure was seen (stop " + ms(r.stop_seconds) + ", rendezvous " +
         ms(r.rendezvous_seconds) + ", spawn " + ms(r.spawn_seconds) + ")";
}

bool made_progress(const WorkerGroup& group) {
  for (const auto& w : group.workers()) {
    try {
      const progress_file::Snapshot s =
          progress_file::Reader(progress_file_path(w->dir)).snapshot(0);
      if (s.beats > 0 || s.completed > 0) return true;
    } catch (const Error&) {
    }
  }
  return false;
}

std::string NoProgressCount::describe() const {
  if (limit_ == 0) return "";
  return "; " + std::to_string(in_a_row_) + " of " + std::to_string(limit_) +
         " attempts in a row without progress";
}

}  // namespace acc::launcher
