#pragma once

// The text of a hang report: one line naming the odd one out, a table of the workers, and their
// stacks with the ranks whose stacks are the same printed once and the outermost frames that
// all ranks share printed once. Where the ranks' collective traces are there (progress_file.h),
// the first line names the stuck collective matched across ranks (collective_match.h) instead.
// Pure: stack_dump.h collects what it formats.

#include <string>
#include <vector>

#include "hangs/collective_match.h"

namespace acc::launcher {

// One worker's stack as a tool printed it, innermost frame first, with what differs between
// processes for no reason (addresses, thread ids) taken out so that equal stacks compare equal.
struct WorkerStack {
  std::string source;                    // "python faulthandler", "gdb", "eu-stack", "/proc"
  std::vector<std::string> lines;        // every thread: headers and frames, as shown
  std::vector<std::string> main_thread;  // the main thread's frames alone
};

// A process the worker started (a DataLoader worker, a shell, any descendant).
struct DescendantSnapshot {
  int pid = 0;
  int parent = 0;
  std::string name;   // /proc/PID/comm
  std::string state;  // R, S, D, Z, T
  WorkerStack stack;
};

struct WorkerSnapshot {
  int rank = 0;
  int local_rank = 0;
  int pid = 0;
  std::string state;                      // from /proc/PID/stat: R, S, D, Z, T
  double seconds_since_progress = 0;      // since its own last line or beat
  double cpu_seconds_since_progress = 0;  // user + system CPU in that time (-1: unknown)
  long progress_count = 0;                // lines and beats so far in this attempt
  WorkerStack stack;
  std::vector<DescendantSnapshot> descendants;  // parents before their children
};

struct HangReport {
  std::string host;
  int nnodes = 1;          // the job's nodes: a report of one node of several says so
  double stalled_for = 0;  // seconds without progress from any worker; 0: asked for on demand
  std::vector<WorkerSnapshot> workers;
  // The collective traces of the job's ranks (all nodes' where they could be gathered); empty
  // when no worker writes one.
  std::vector<RankTrace> traces;
  // Extra sections, printed after the collectives (stragglers, Flight Recorder, NCCL RAS).
  std::vector<std::string> sections;
};

// Which ranks look stuck, and why, in one phrase: empty ranks when all look alike.
struct OddOneOut {
  std::vector<int> ranks;
  std::string reason;
};

// In order: a rank whose stack differs from a clear majority's; else ranks outside a collective
// while the others wait in one; else the ranks that made no progress while others did.
OddOneOut find_odd_one_out(const std::vector<WorkerSnapshot>& workers);

// True for a frame inside a collective or a process-group wait (torch.distributed, c10d, Gloo,
// NCCL).
bool is_collective_frame(const std::string& frame);

// The whole report, ending in a newline. Its first line starts "acc-launch: hang" and names the
// odd one out.
std::string format_hang_report(const HangReport& report);

// "0, 2, 3" or "0-3".
std::string format_ranks(const std::vector<int>& ranks);

}  // namespace acc::launcher
