#pragma once

// torchelastic's health check (TORCHELASTIC_HEALTH_CHECK_PORT), served as Meta's agent serves it
// and PyTorch's open-source one only announces: HTTP on that port, any path, 200 while this
// node's workers make progress and 503 once none has for the timeout (torchelastic's 60 s), so
// an orchestrator's liveness probe can tell a hung job from a working one. The body is one line
// of JSON with the last progress time.
//
// Progress is what the worker's progress file (acc/common/progress_file.h) records: a beat, a
// completed collective, a section opened or closed. While no attempt runs (before the first, a
// rendezvous, between attempts, the exit barrier) and while no worker of the attempt writes its
// progress file (a program without libacc or the Python hook), the check says the launcher is
// alive, as torchelastic's agent does before its file timer starts or without one.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "acc/common/progress_file.h"

namespace acc::launcher {

// What the health check sees at one moment.
struct Liveness {
  enum class State {
    kNoAttempt,     // no worker runs: alive
    kNotReporting,  // no worker of the attempt writes its progress file: alive
    kProgress,      // the last progress was within the timeout
    kNoProgress,    // it was longer ago
  };
  State state = State::kNoAttempt;
  double seconds_since_progress = 0;  // kProgress, kNoProgress; else 0
};

// The liveness of an attempt started at `started_ns` whose workers' files read `files`, at
// `now_ns` (progress_file::now_ns() times). The attempt's start counts as progress, as the
// start of torchelastic's file timer does. Pure.
Liveness liveness_of(const std::vector<progress_file::Snapshot>& files, std::int64_t started_ns,
                     std::int64_t now_ns, std::chrono::milliseconds timeout);

// The whole HTTP/1.1 reply for `liveness` (http_server.h): 200 unless kNoProgress, 503 then;
// the body `{"state": ..., "last_progress_time": <Unix seconds>, "seconds_since_progress": ...,
// "timeout_s": ...}`. `unix_now` is the wall clock's time in seconds. Pure.
std::string health_check_reply(const Liveness& liveness, double unix_now,
                               std::chrono::milliseconds timeout);

// The workers' progress as the health check's thread sees it: the agent says when an attempt's
// workers start and end, the server's thread looks. Thread-safe; look() takes a lock for a
// pointer copy only, then reads the mapped files.
class WorkerProgress {
 public:
  explicit WorkerProgress(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  // The attempt's workers have started; `progress_files` are theirs (one that cannot be read
  // counts as a worker that does not report).
  void attempt_started(const std::vector<std::string>& progress_files);
  // No worker runs until the next attempt_started().
  void attempt_ended();
  Liveness look() const;
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  struct Attempt;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::shared_ptr<const Attempt> attempt_;  // null: none runs
};

}  // namespace acc::launcher
