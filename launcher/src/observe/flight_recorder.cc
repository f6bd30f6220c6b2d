#include "observe/flight_recorder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "observe/hang_report.h"

namespace acc::launcher {
namespace {

constexpr char kDumpPrefix[] = "flight_recorder_rank_";
constexpr char kPipePrefix[] = "flight_recorder_pipe_rank_";

bool is_fifo(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> flight_recorder_env(
    const std::string& worker_dir) {
  const std::string dump = worker_dir + "/" + kDumpPrefix;
  return {{"TORCH_NCCL_TRACE_BUFFER_SIZE", kFlightRecorderEntries},
          {"TORCH_FR_BUFFER_SIZE", kFlightRecorderEntries},
          {"TORCH_NCCL_DUMP_ON_TIMEOUT", "1"},
          {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", dump},
          {"TORCH_FR_DUMP_TEMP_FILE", dump},
          {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", worker_dir + "/" + kPipePrefix}};
}

std::string flight_recorder_dump(const std::string& worker_dir, int rank) {
  return worker_dir + "/" + kDumpPrefix + std::to_string(rank);
}

std::string flight_recorder_pipe(const std::string& worker_dir, int rank) {
  return worker_dir + "/" + kPipePrefix + std::to_string(rank) + ".pipe";
}

std::vector<int> poke_flight_recorder(const std::vector<FlightRecorderTarget>& targets) {
  std::vector<int> poked;
  for (const FlightRecorderTarget& t : targets) {
    const std::string pipe = flight_recorder_pipe(t.worker_dir, t.rank);
    if (!is_fifo(pipe)) continue;
    // Non-blocking: with no reader (the rank is gone) open fails with ENXIO instead of waiting.
    const int fd = ::open(pipe.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    if (::write(fd, "1", 1) == 1) poked.push_back(t.rank);
    ::close(fd);
  }
  return poked;
}

std::string flight_recorder_section(const std::vector<FlightRecorderTarget>& targets,
                                    const std::vector<int>& poked) {
  std::vector<int> dumped;
  std::string dir;
  for (const FlightRecorderTarget& t : targets) {
    if (!exists(flight_recorder_dump(t.worker_dir, t.rank))) continue;
    dumped.push_back(t.rank);
    dir = t.worker_dir;
  }
  if (poked.empty() && dumped.empty()) return "";
  std::string text = "Flight Recorder (PyTorch's NCCL trace):\n";
  if (!poked.empty())
    text += "  asked " + std::string(poked.size() == 1 ? "rank " : "ranks ") + format_ranks(poked) +
            " to dump through their pipes\n";
  if (dumped.empty()) {
    text += "  no dump written yet; they appear as <worker dir>/" + std::string(kDumpPrefix) +
            "<rank>\n";
    return text;
  }
  text += "  dumps of " + std::string(dumped.size() == 1 ? "rank " : "ranks ") +
          format_ranks(dumped) + " in the worker directories (e.g. " +
          flight_recorder_dump(dir, dumped.back()) + ")\n";
  text +=
      "  analyze them together with PyTorch's analyzer (PyTorch >= 2.7): copy them into one "
      "directory, then `torchfrtrace DIR --prefix " +
      std::string(kDumpPrefix) + "`\n";
  return text;
}

}  // namespace acc::launcher
