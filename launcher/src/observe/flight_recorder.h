#pragma once

// PyTorch's Flight Recorder (ProcessGroupNCCL, PyTorch >= 2.2): a ring of each rank's NCCL
// collectives that PyTorch dumps on a collective timeout, or when a byte is written to the rank's
// dump pipe. The launcher turns it on for every worker (the user's own values win: the agent adds
// these only where the environment lacks them) with the dumps and pipes in the worker's directory
// of the run directory, and at a stall pokes the pipes and lists the dumps in the hang report.
// The variables are inert without NCCL (a Gloo or CPU job reads none of them).

#include <string>
#include <utility>
#include <vector>

namespace acc::launcher {

inline constexpr char kFlightRecorderEntries[] = "2000";

// The variables for a worker whose directory is `worker_dir`: the ring's size under both of its
// names (TORCH_NCCL_TRACE_BUFFER_SIZE before PyTorch 2.7, TORCH_FR_BUFFER_SIZE after), the dump on
// timeout, the dump file's prefix (PyTorch appends the rank) and the dump pipe's (PyTorch makes
// <prefix><rank>.pipe).
std::vector<std::pair<std::string, std::string>> flight_recorder_env(const std::string& worker_dir);

// The dump file and pipe of rank `rank` under the variables above.
std::string flight_recorder_dump(const std::string& worker_dir, int rank);
std::string flight_recorder_pipe(const std::string& worker_dir, int rank);

struct FlightRecorderTarget {
  int rank = 0;
  std::string worker_dir;
};

// Writes a byte to the dump pipe of every target that has one (a rank whose NCCL process group
// made it); returns the ranks poked. Never blocks, never throws.
std::vector<int> poke_flight_recorder(const std::vector<FlightRecorderTarget>& targets);

// The report's section: which ranks were asked to dump, which dumps are there, and how to read
// them with PyTorch's analyzer. Empty when no rank has a pipe or a dump.
std::string flight_recorder_section(const std::vector<FlightRecorderTarget>& targets,
                                    const std::vector<int>& poked);

}  // namespace acc::launcher
