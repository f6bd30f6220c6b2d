#pragma once

// The job as `--status_port` shows it (docs/launch.md, "Watching a job"): per rank its steps
// (beats), completed collectives, time inside them, quiet time, step time and its recent history,
// straggler ratio and state; per node its workers alive, attempt and restarts; per job its world
// size and nodes. The agent tells the board what only it knows (an attempt's workers, which still
// run, a restart, a hang report); the status server's thread samples the workers' progress files
// (acc/common/progress_file.h) once a second and renders the board as Prometheus' text format,
// as JSON and as a page. The board is thread-safe: each call takes its lock for memory work only.

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "acc/rendezvous/clock.h"
#include "process/proc.h"

namespace acc::progress_file {
class Reader;
}

namespace acc::launcher {

class Nvml;

// How many step times each rank's history keeps (one per sample with a step: about a minute).
inline constexpr std::size_t kStepHistory = 60;
// The window over which step times and straggler ratios are judged.
inline constexpr std::chrono::seconds kStatusWindow{10};
// A rank without progress for this long is shown as quiet.
inline constexpr std::chrono::seconds kQuietAfter{10};

struct RankStatus {
  int rank = 0;
  int local_rank = 0;
  int node = 0;  // its launcher's node rank
  std::string host;
  int pid = 0;
  std::string state;              // starting, running, quiet, stalled, exited
  bool reporting = false;         // writes its progress file (libacc, the Python hook)
  std::uint64_t steps = 0;        // beats: libacc's optimizer steps, acc_launch.beat()
  std::uint64_t collectives = 0;  // completed collective and point-to-point calls
  double collective_seconds = 0;  // time inside the completed ones
  double seconds_since_progress = 0;
  std::optional<double> step_seconds;     // over the last kStatusWindow, where it stepped
  std::optional<double> straggler_ratio;  // compute per collective over the median rank's
  bool straggler = false;
  std::string last_collective;              // "all_reduce (default)"; empty: none yet
  bool in_collective = false;               // the last one is still in flight
  std::vector<double> recent_step_seconds;  // oldest first, at most kStepHistory
  // The highest SM utilization of its processes on any GPU over the last sample, 0 to 1 (NVML);
  // none where there is no NVML.
  std::optional<double> gpu_busy;
};

// One node's launcher.
struct NodeStatus {
  int node_rank = 0;
  std::string host;
  std::string phase;  // waiting (no attempt runs), running, ended
  int attempt = 0;    // 0 until the first attempt starts, then 1, 2...
  int restarts = 0;   // failure restarts so far
  int workers_alive = 0;
  // Workers' exits with --sdc_exit_codes' RESTART and SUSPECT codes so far.
  int sdc_restart_exits = 0;
  int sdc_suspect_exits = 0;
};

// One recovery of this node: from the moment it saw a failure (its own worker's exit, or another
// node's restart, end or new round) to the next attempt's workers spawned, in phases.
struct RecoveryStatus {
  int attempt = 0;                // the attempt it started: 2 for the first restart
  std::string cause;              // one line: "rank 1 exited with 1: Python exception: ..."
  double stop_seconds = 0;        // until this node's workers had all ended
  double rendezvous_seconds = 0;  // then until the next attempt was agreed (barrier or round)
  double spawn_seconds = 0;       // then until its workers were spawned
  double seconds = 0;             // the three
};

// Where the job's wall time went, on this node, since its first attempt started. While the job
// runs (StatusBoard::status()), as of now: the wall time so far, and each attempt's time counted
// as it is at the attempt's end, once that is known (goodput so far: progress_seconds over
// wall_seconds).
struct GoodputStatus {
  double wall_seconds = 0;      // since the first attempt started
  double progress_seconds = 0;  // in attempts whose workers made progress (a beat, a collective)
  double recovery_seconds = 0;  // in recoveries (RecoveryStatus::seconds)
  double lost_seconds = 0;      // in attempts without progress, and recoveries
};

// This node's standbys (agent/standbys.h): how many wait, how many have torch imported, and
// the memory they hold.
struct WarmWorkersStatus {
  int waiting = 0;
  int ready = 0;
  double resident_bytes = 0;
};

// What the serving launcher shows: its own node, and on node 0 of several the other nodes too.
struct JobStatus {
  std::string job_id;
  std::string host;
  int node_rank = 0;
  int nnodes = 1;
  int world_size = 0;
  int attempt = 0;   // 0 until the first attempt starts, then 1, 2...
  int restarts = 0;  // failure restarts so far
  int workers_alive = 0;
  int sdc_restart_exits = 0;  // as NodeStatus's
  int sdc_suspect_exits = 0;
  std::string phase;                       // waiting (no attempt runs), running, ended
  std::vector<NodeStatus> nodes;           // this node, then (node 0) the other nodes that reported
  std::vector<RankStatus> ranks;           // this node's, then (node 0) the other nodes', by rank
  std::string hang_report;                 // the last one this launcher printed; empty: none
  std::vector<RecoveryStatus> recoveries;  // this node's, oldest first
  GoodputStatus goodput;                   // this node's
  WarmWorkersStatus warm_workers;          // this node's (not sent to node 0)
};

// Prometheus' text exposition format (version 0.0.4): a HELP and TYPE line for every family,
// labels rank/local_rank/node/host/job. Pure.
std::string prometheus_text(const JobStatus& status);
// The same as one JSON object. Pure.
std::string job_json(const JobStatus& status);
// A node's status as it travels to node 0 through the store: job_json's object tagged with its
// format and version (nodes/store_json.h). Pure.
std::string encode_node_status(const JobStatus& status);
// encode_node_status's text read back strictly; nullopt for anything else (another version, a
// torn value, a field of the wrong type). Pure.
std::optional<JobStatus> decode_node_status(std::string_view text);
// The page at "/": self-contained (style and script inline), it reads /api/job each second.
const std::string& status_page();

// Where the attempt's store is (node 0's), through which the nodes' statuses travel.
struct StatusJobStore {
  std::string host;  // empty: none (a job of one node)
  int port = 0;
  int restart_count = 0;
  int nnodes = 1;
  int node_rank = 0;
  std::string job_secret;  // the launchers' (LaunchPlan::job_secret), proved to the store
};

class StatusBoard {
 public:
  struct Worker {
    int rank = 0;
    int local_rank = 0;
    int pid = 0;
    std::string progress_file;  // one that cannot be read is a worker that does not report
  };

  using JobStore = StatusJobStore;

  // `proc` (the machine's, a fake in tests) says whose child each busy GPU process is; `clock`
  // (any thread's: Clock::steady(), a fake in tests) times the goodput so far. Both must outlive
  // the board.
  StatusBoard(std::string job_id, std::string host, int node_rank,
              proc::Reader& proc = proc::Reader::machine(),
              const rendezvous::Clock& clock = rendezvous::Clock::steady());
  ~StatusBoard();
  StatusBoard(const StatusBoard&) = delete;
  StatusBoard& operator=(const StatusBoard&) = delete;

  // The agent's side.
  void attempt_started(int restarts, int nnodes, int world_size, const std::vector<Worker>& workers,
                       JobStore store = {});
  void workers_running(const std::vector<bool>& running);  // in attempt_started's order
  void stalled(const std::string& hang_report);
  void hang_report(const std::string& report);  // an on-demand one: the job goes on
  void attempt_ended();
  void job_ended();
  // A worker exited with an --sdc_exit_codes code: SUSPECT, else RESTART.
  void sdc_exit(bool suspect);
  // A recovery ended (the next attempt's workers are spawned).
  void recovered(const RecoveryStatus& recovery);
  // The agent's goodput (Recoveries): through the attempt that ended last, and the recovery
  // after it. Until the next attempt_started(), status() adds no running attempt's time. While
  // an attempt runs, status() adds its time so far as the agent counts it at its end: as progress
  // once a worker of this node has made some (a beat, a completed collective; then all of it),
  // else not yet (it is lost only if the attempt ends so). The wall time runs from the first
  // attempt's start until job_ended(), then is the agent's.
  void set_goodput(const GoodputStatus& goodput);
  void set_warm_workers(const WarmWorkersStatus& warm);

  // The server's side: one look at every worker's file (once a second), and the board now.
  void sample();
  JobStatus status() const;
  // The status exchange's (status_server.h): the attempt's store, and on node 0 the other
  // nodes' latest statuses, which status() shows after this node's.
  JobStore job_store() const;
  void set_other_nodes(std::vector<JobStatus> others);

 private:
  struct Rank;
  proc::Reader& proc_;
  mutable std::mutex mutex_;
  JobStatus job_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<bool> running_;
  std::unique_ptr<Nvml> nvml_;  // the server thread's own client; null: none (yet)
  bool nvml_tried_ = false;
  JobStore store_;
  std::vector<JobStatus> others_;
  bool stalled_ = false;
  std::int64_t attempt_started_ns_ = 0;
  // The goodput so far (set_goodput).
  GoodputStatus goodput_now(bool progressed) const;
  const rendezvous::Clock& clock_;
  std::optional<rendezvous::Clock::time_point> first_started_;
  std::optional<rendezvous::Clock::time_point> counting_since_;  // the running attempt's start
};

}  // namespace acc::launcher
