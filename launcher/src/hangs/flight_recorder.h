#pragma once

// PyTorch's Flight Recorder (ProcessGroupNCCL, PyTorch >= 2.2): a ring of each rank's NCCL
// collectives that PyTorch dumps on a collective timeout, or when a byte is written to the rank's
// dump pipe. The launcher turns it on for every worker (the user's own values win: the agent adds
// these only where the environment lacks them) with the dumps and pipes in the worker's directory
// of the run directory, and at a stall pokes the pipes and lists the dumps in the hang report.
// Without NCCL they cost nothing, but they are read: PyTorch >= 2.8 makes a Flight Recorder for
// a Gloo group too (and warns there about a deprecated name as NCCL's does).

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "acc/common/torch_env.h"
#include "acc/rendezvous/clock.h"
#include "process/proc.h"

namespace acc::launcher {

inline constexpr char kFlightRecorderEntries[] = "2000";

// The variables for a worker whose directory is `worker_dir`, under the names its PyTorch `torch`
// reads (acc/common/torch_env.h; nullopt: under every name): the ring's size
// (TORCH_NCCL_TRACE_BUFFER_SIZE before PyTorch 2.7, TORCH_FR_BUFFER_SIZE after), the dump on
// timeout, the dump file's prefix (PyTorch appends the rank) and the dump pipe's (PyTorch makes
// <prefix><rank>.pipe). None for PyTorch < 2.2, which has no Flight Recorder. A caller adds each
// only where the environment sets none of its setting's names (torch_env::is_set).
std::vector<std::pair<std::string, std::string>> flight_recorder_env(
    const std::string& worker_dir, const std::optional<torch_env::Version>& torch);

// The dump file and pipe of rank `rank` under the variables above.
std::string flight_recorder_dump(const std::string& worker_dir, int rank);
std::string flight_recorder_pipe(const std::string& worker_dir, int rank);

struct FlightRecorderTarget {
  int rank = 0;
  std::string worker_dir;
  int pid = 0;  // the worker's process: a dump it still has open is not complete
};

// The ranks a poke reached, and how each one's dump file looked just before (so that a dump left
// by an earlier poke is not taken for the answer to this one).
struct FlightRecorderPoke {
  struct Before {
    bool exists = false;
    unsigned long long inode = 0;
    long long size = 0;
    long long mtime_ns = 0;
  };
  std::vector<int> ranks;
  std::vector<Before> before;  // one per rank of `ranks`
};

// Writes a byte to the dump pipe of every target that has one (a rank whose NCCL process group
// made it). Never blocks, never throws.
FlightRecorderPoke poke_flight_recorder(const std::vector<FlightRecorderTarget>& targets);

// How long the launcher waits for the poked ranks' dumps before it goes on (and, with the default
// --stall_action stop, stops the workers): PyTorch's heartbeat thread reads the pipe once a second
// (TORCH_NCCL_COORD_CHECK_MILSEC) and then writes the dump.
inline constexpr std::chrono::milliseconds kFlightRecorderDumpWait{10'000};

// Waits, at most `limit` on `clock`, until the dump of every poked rank is complete: PyTorch writes
// it in place (an ofstream on <prefix><rank>, no temporary and rename), so complete means changed
// since the poke, not empty, and no longer open in the worker or its descendants (as `proc`
// reads them). Polls every 50 ms; a rank whose process is gone is not waited for. Returns the
// ranks whose dump is complete, in the order of poke.ranks.
std::vector<int> wait_for_flight_recorder_dumps(
    const std::vector<FlightRecorderTarget>& targets, const FlightRecorderPoke& poke,
    std::chrono::milliseconds limit, proc::Reader& proc,
    const rendezvous::Clock& clock = rendezvous::Clock::steady());

// Links (or copies) the complete dumps into <attempt dir>/flight_recorder/, the one directory
// PyTorch's analyzer reads, and writes the report's section: which ranks were asked to dump,
// which dumps are complete and where, and the `torchfrtrace` command that reads them (with
// --allow-incomplete-ranks when they cover fewer than `world_size` ranks). Empty when no rank has
// a pipe or a dump.
std::string flight_recorder_section(const std::vector<FlightRecorderTarget>& targets,
                                    const FlightRecorderPoke& poke,
                                    const std::vector<int>& complete, int world_size);

}  // namespace acc::launcher
