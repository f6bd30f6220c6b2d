#include "status/health_check.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "acc/common/error.h"
#include "status/http_server.h"

namespace acc::launcher {
namespace {

const char* state_name(Liveness::State state) {
  switch (state) {
    case Liveness::State::kNoAttempt:
      return "no_attempt";
    case Liveness::State::kNotReporting:
      return "not_reporting";
    case Liveness::State::kProgress:
      return "progress";
    case Liveness::State::kNoProgress:
      return "no_progress";
  }
  return "unknown";
}

// To the millisecond, the precision of the progress files' stamps that a reader can use.
double milliseconds_precision(double seconds) {
  return std::round(seconds * 1000) / 1000;
}

}  // namespace

Liveness liveness_of(const std::vector<progress_file::Snapshot>& files, std::int64_t started_ns,
                     std::int64_t now_ns, std::chrono::milliseconds timeout) {
  Liveness liveness;
  std::int64_t last = started_ns;
  bool reporting = false;
  for (const progress_file::Snapshot& file : files) {
    if (file.writer_pid == 0) continue;
    reporting = true;
    last = std::max(last, file.last_progress_ns);
  }
  if (!reporting) {
    liveness.state = Liveness::State::kNotReporting;
    return liveness;
  }
  liveness.seconds_since_progress =
      static_cast<double>(std::max<std::int64_t>(0, now_ns - last)) / 1e9;
  liveness.state = liveness.seconds_since_progress * 1000 <= static_cast<double>(timeout.count())
                       ? Liveness::State::kProgress
                       : Liveness::State::kNoProgress;
  return liveness;
}

std::string health_check_reply(const Liveness& liveness, double unix_now,
                               std::chrono::milliseconds timeout) {
  const nlohmann::ordered_json reply = {
      {"state", state_name(liveness.state)},
      {"last_progress_time", milliseconds_precision(unix_now - liveness.seconds_since_progress)},
      {"seconds_since_progress", milliseconds_precision(liveness.seconds_since_progress)},
      {"timeout_s", static_cast<double>(timeout.count()) / 1000},
  };
  const std::string body = reply.dump() + "\n";
  const bool alive = liveness.state != Liveness::State::kNoProgress;
  return http_reply(alive ? 200 : 503, "application/json", body);
}

// --- WorkerProgress ------------------------------------------------------------------------------

struct WorkerProgress::Attempt {
  std::int64_t started_ns = 0;
  std::vector<std::unique_ptr<progress_file::Reader>> files;  // null: cannot be read
};

void WorkerProgress::attempt_started(const std::vector<std::string>& progress_files) {
  auto attempt = std::make_shared<Attempt>();
  attempt->started_ns = progress_file::now_ns();
  attempt->files = progress_file::open_readers(progress_files);
  const std::lock_guard lock(mutex_);
  attempt_ = std::move(attempt);
}

void WorkerProgress::attempt_ended() {
  const std::lock_guard lock(mutex_);
  attempt_.reset();
}

Liveness WorkerProgress::look() const {
  std::shared_ptr<const Attempt> attempt;
  {
    const std::lock_guard lock(mutex_);
    attempt = attempt_;
  }
  if (!attempt) return Liveness{};
  std::vector<progress_file::Snapshot> files;
  for (const auto& file : attempt->files)
    if (file) files.push_back(file->snapshot(0));
  return liveness_of(files, attempt->started_ns, progress_file::now_ns(), timeout_);
}

}  // namespace acc::launcher
