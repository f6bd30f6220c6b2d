#pragma once

// torchelastic's file timer, served as torchrun's agent serves it (PyTorch's
// torch/distributed/elastic/timer/file_based_local_timer.py): the launcher makes a named pipe and
// names it in TORCHELASTIC_TIMER_FILE; a worker's FileTimerClient writes one JSON request a line,
//
//   {"version": 1, "pid": 4711, "scope_id": "load", "expiration_time": 1764000000.5, "signal": 9}
//
// to open a region (expiration_time: wall-clock seconds, time.time()) or, with expiration_time
// -1, to close it. When an open region's time passes, the launcher sends that pid the signal its
// request named (the earliest expired region with a signal > 0; SIGKILL by default on the client
// side) and forgets every region of that pid, as torchrun does. The agent polls fd() with the
// workers' pipes, calls read_requests() when it is readable, and expired() at the next expiry.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "acc/common/unique_fd.h"

namespace acc::launcher {

struct FileTimerRequest {
  int pid = 0;
  std::string scope_id;
  double expiration_time = 0;  // wall-clock seconds; < 0: release the region
  int signal = 0;              // <= 0: an expiry is only reported
};

// One request line, without its newline. Pure; nullopt for what is not a request (bad JSON, a
// missing field, a pid that is not positive).
std::optional<FileTimerRequest> parse_file_timer_request(std::string_view line);

// The regions that are open, by (pid, scope id). Pure: the caller passes the time.
class FileTimerRegions {
 public:
  struct Expiry {
    int pid = 0;
    std::string scope_id;  // the earliest expired region that asked for a signal
    double expiration_time = 0;
    int signal = 0;  // 0 when none of the pid's expired regions asked for one
  };

  void apply(const FileTimerRequest& request);
  // The pids with an expired region at `now` (wall seconds); all their regions are forgotten.
  std::vector<Expiry> take_expired(double now);
  // The earliest expiration_time of an open region.
  std::optional<double> next_expiry() const;
  size_t size() const { return regions_.size(); }

 private:
  std::map<std::pair<int, std::string>, FileTimerRequest> regions_;
};

// The named pipe and the regions its requests open. Not thread-safe; one per launcher.
class FileTimer {
 public:
  // Makes the pipe at `path` (replacing what is there) and opens it. Throws SystemError.
  explicit FileTimer(std::string path);
  ~FileTimer();  // closes and removes the pipe
  FileTimer(const FileTimer&) = delete;
  FileTimer& operator=(const FileTimer&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return read_end_.get(); }  // readable when requests wait

  // Reads the requests that have arrived (never blocks) and applies them.
  void read_requests();
  FileTimerRegions& regions() { return regions_; }

 private:
  std::string path_;
  UniqueFd read_end_;
  // Our own writer, so the reader never sees end-of-file when the last client closes.
  UniqueFd write_end_;
  std::string partial_;  // a line not complete yet
  FileTimerRegions regions_;
};

}  // namespace acc::launcher
