#pragma once

// The agent's side of hang detection for one attempt: feeds the StallMonitor with the workers'
// output lines (progress() from the agent), and at each tick with what their progress files say
// (beats, completed collectives, sections opened or closed: acc/common/progress_file.h, counters
// only) and libacc's beats in the job's store; samples their CPU time (and, for a rank that uses
// none, its GPUs' through NVML), so that a group whose every rank computes outside collectives is
// not taken for a hung one (one notice instead); and
// when the group stalls, when a worker's named section passes its deadline, or on demand
// (SIGUSR2), collects the stacks (stack_dump.h) and formats the report (hang_report.h).
// All calls come from the agent's thread; tick() blocks while stacks are collected (a few s).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "acc/launcher/plan/plan.h"
#include "acc/rendezvous/clock.h"
#include "hangs/collective_match.h"
#include "hangs/hang_report.h"
#include "hangs/stack_dump.h"
#include "hangs/stall_monitor.h"
#include "hangs/straggler_watch.h"
#include "process/os.h"

namespace acc::rendezvous {
class StoreClient;
}
namespace acc::progress_file {
class Reader;
}

namespace acc::launcher {

// Where the launcher with pid `launcher_pid` writes the report `acc-launch stacks` asked for.
std::string on_demand_report_path(int launcher_pid);

// The store key libacc's rank `rank` adds 1 to at each optimizer step (at most once a second),
// under the attempt's prefix, as seen by a StoreClient (which adds PyTorch's leading "/").
std::string beat_key(int restart_count, int rank);

// Where node `node_rank`'s launcher puts the one-line summary of its last stall report (its odd
// one out, or none), so that node 0's report can name the stuck node.
std::string node_summary_key(int restart_count, int node_rank);

// Appends `report` to the file at `path` (the run directory's hang_report.txt). Never throws.
void append_report(const std::string& path, const std::string& report);

// Writes `report` to on_demand_report_path(getpid()) whole: to a temporary file renamed over it,
// so the reader never sees half of it. Never throws.
void publish_on_demand_report(const std::string& report);

class StallWatch {
 public:
  using Clock = rendezvous::Clock;
  struct Worker {
    int rank = 0;
    int local_rank = 0;
    int pid = 0;
    std::string dir;  // the worker's log directory, where its stack files go
  };

  // `timeout` zero: no stall detection, only the sections' deadlines and on-demand reports. The
  // start-up limit is the plan's stall_init_timeout. `notice` prints a one-line message for
  // the user (the busy group's).
  // `os` is the agent's: its clock, so that its deadlines and this watch's ticks are on one
  // clock (a fake one in the agent's tests); its /proc, for the workers' state and CPU time; and
  // its processes, for their stacks (all scripted in this watch's tests). It must outlive the
  // watch.
  StallWatch(const LaunchPlan& plan, const Round& round, std::vector<Worker> workers,
             std::chrono::milliseconds timeout, std::function<void(const std::string&)> notice,
             Os& os);
  ~StallWatch();

  // Worker `index` (its place in the agent's list) wrote a line.
  void progress(int index);
  // When tick() wants calling; time_point::max() when never.
  Clock::time_point next_wake() const;
  // Reads the progress files and the beats, samples CPU time; true when the group has just
  // stalled (once per stall) or a worker's section has just passed its deadline (once per
  // section).
  bool tick();
  // Collects the stacks of the workers still running (`running` in the agent's order) and
  // returns the report; `stalled` says whether it is the stall's report or an on-demand one.
  std::string report(const std::vector<bool>& running, bool stalled);
  // The end-of-attempt straggler table when a straggler was named during it; empty otherwise.
  std::string straggler_summary() const;

 private:
  struct Overrun {
    size_t index = 0;
    std::string section;
    double timeout_s = 0;
    double open_s = 0;
  };

  // report()'s parts: the workers' state, their and their descendants' stacks, the first line.
  HangReport snapshot(const std::vector<size_t>& indices, Clock::time_point now, bool stalled);
  void collect_report_stacks(HangReport& report, const std::vector<size_t>& indices,
                             std::vector<StackTarget> targets);
  std::string headed_by_overrun(const std::string& text);

  void poll_beats();
  // Progress and sections from the workers' files; true when a section passed its deadline.
  bool poll_files();
  // The workers' progress files, at the first poll (a null one: that worker has none).
  void map_files();
  void sample_cpu();
  void sample_busy(Clock::time_point now);
  size_t busy_on_gpu(const std::vector<size_t>& indices);
  // The job's store, connected on first use; null while it cannot be reached.
  rendezvous::StoreClient* store();
  // Several nodes: shares this node's summary and, on node 0, adds the other nodes' to `report`.
  std::string with_other_nodes(const std::string& report);
  // Several nodes: puts this node's traces in node 0's store (at a stall).
  void share_traces(const std::vector<RankTrace>& traces);
  // Several nodes: puts this node's straggler window in node 0's store; on node 0, returns the
  // other nodes' (StragglerWatch::Exchange).
  std::optional<std::vector<NodeTimings>> exchange_timings(const NodeTimings& mine);
  // Whose ranks the straggler tables show: "every rank", "this node's ranks", "every node's ranks".
  const char* whose_ranks() const;
  // Node 0: the traces of every rank, its own as read here, the others' from the store.
  std::vector<RankTrace> gathered_traces(const std::vector<RankTrace>& local);

  Clock::time_point clock_now() const { return os_.now(); }

  Os& os_;
  const LaunchPlan& plan_;
  Round round_;
  std::vector<Worker> workers_;
  bool enabled_;
  StallMonitor monitor_;
  std::chrono::milliseconds poll_interval_;
  Clock::time_point next_poll_;
  std::unique_ptr<rendezvous::StoreClient> store_;
  Clock::time_point next_store_connect_;
  std::vector<long long> beats_seen_;
  std::vector<long> counted_at_sample_;
  std::vector<double> cpu_at_progress_;
  std::function<void(const std::string&)> notice_;
  std::vector<std::unique_ptr<progress_file::Reader>> files_;  // empty until the first poll
  std::vector<std::int64_t> file_progress_seen_;
  std::vector<bool> in_collective_;
  std::vector<std::int64_t> overrun_reported_;  // section_started_ns of the last one reported
  std::optional<Overrun> overrun_;              // the section the next report is about
  std::vector<double> cpu_at_poll_;
  Clock::time_point polled_at_;
  bool busy_noticed_ = false;
  StragglerWatch stragglers_;
};

}  // namespace acc::launcher
