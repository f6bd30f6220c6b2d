#include "hangs/flight_recorder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include "hangs/hang_report.h"
#include "process/proc.h"

namespace acc::launcher {
namespace {

constexpr char kDumpPrefix[] = "flight_recorder_rank_";
constexpr char kPipePrefix[] = "flight_recorder_pipe_rank_";
constexpr char kDumpDir[] = "flight_recorder";

bool is_fifo(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

FlightRecorderPoke::Before look(const std::string& path) {
  FlightRecorderPoke::Before state;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return state;
  state.exists = true;
  state.inode = st.st_ino;
  state.size = st.st_size;
  state.mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return state;
}

bool same(const FlightRecorderPoke::Before& a, const FlightRecorderPoke::Before& b) {
  return a.exists == b.exists && a.inode == b.inode && a.size == b.size && a.mtime_ns == b.mtime_ns;
}

const FlightRecorderTarget* target_of(const std::vector<FlightRecorderTarget>& targets, int rank) {
  for (const FlightRecorderTarget& t : targets)
    if (t.rank == rank) return &t;
  return nullptr;
}

// Whether the worker, or a process it started (a shell's python), still has `path` open.
bool still_open(int pid, const std::string& path, proc::Reader& proc) {
  if (pid <= 0) return false;
  char real[PATH_MAX];
  const std::string resolved = ::realpath(path.c_str(), real) ? real : path;
  if (proc.has_open(pid, resolved)) return true;
  for (const auto& [child, parent] : proc.descendants(pid))
    if (proc.has_open(child, resolved)) return true;
  return false;
}

// Exited (a zombie until the agent reaps it) or reaped.
bool gone(int pid, proc::Reader& proc) {
  if (pid <= 0) return false;
  const proc::Stat st = proc.stat(pid);
  return !st.ok || st.state == "Z";
}

// The dump written since the poke, whole: PyTorch's writer (an ofstream) has closed it.
bool complete(const FlightRecorderTarget& t, const FlightRecorderPoke::Before& before,
              proc::Reader& proc) {
  const std::string path = flight_recorder_dump(t.worker_dir, t.rank);
  const FlightRecorderPoke::Before now = look(path);
  return now.exists && now.size > 0 && !same(now, before) && !still_open(t.pid, path, proc);
}

// A copy of `from` at `to` (where a hard link cannot be made: another file system).
bool copy_file(const std::string& from, const std::string& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return false;
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = out >= 0;
  char buffer[65536];
  for (ssize_t n; ok && (n = ::read(in, buffer, sizeof buffer)) != 0;)
    ok = n > 0 && ::write(out, buffer, static_cast<size_t>(n)) == n;
  ::close(in);
  if (out >= 0) ::close(out);
  return ok;
}

// <attempt dir>/flight_recorder/<prefix><rank>: a hard link to the worker's dump (a copy where
// links fail), so that one directory holds every rank's, as torchfrtrace wants. POSIX calls, not
// std::filesystem: in acc::launch this runs in a program linked with a PyTorch wheel's libtorch,
// whose own std::filesystem is unreliable (docs/runtime.md).
std::string gather(const FlightRecorderTarget& t) {
  std::string dir = t.worker_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  dir = (slash == std::string::npos ? "."
         : slash == 0               ? ""
                                    : dir.substr(0, slash)) +
        "/" + kDumpDir;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return "";
  const std::string from = flight_recorder_dump(t.worker_dir, t.rank);
  const std::string to = dir + "/" + kDumpPrefix + std::to_string(t.rank);
  ::unlink(to.c_str());
  if (::link(from.c_str(), to.c_str()) != 0 && !copy_file(from, to)) return "";
  return dir;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> flight_recorder_env(
    const std::string& worker_dir, const std::optional<torch_env::Version>& torch) {
  const std::string dump = worker_dir + "/" + kDumpPrefix;
  std::vector<std::pair<std::string, std::string>> env;
  for (const auto& [name, value] :
       {std::pair<const char*, std::string>{"TORCH_NCCL_TRACE_BUFFER_SIZE", kFlightRecorderEntries},
        {"TORCH_FR_BUFFER_SIZE", kFlightRecorderEntries},
        {"TORCH_NCCL_DUMP_ON_TIMEOUT", "1"},
        {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", dump},
        {"TORCH_FR_DUMP_TEMP_FILE", dump},
        {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", worker_dir + "/" + kPipePrefix}})
    if (torch_env::reads(name, torch)) env.emplace_back(name, value);
  return env;
}

std::string flight_recorder_dump(const std::string& worker_dir, int rank) {
  return worker_dir + "/" + kDumpPrefix + std::to_string(rank);
}

std::string flight_recorder_pipe(const std::string& worker_dir, int rank) {
  return worker_dir + "/" + kPipePrefix + std::to_string(rank) + ".pipe";
}

FlightRecorderPoke poke_flight_recorder(const std::vector<FlightRecorderTarget>& targets) {
  FlightRecorderPoke poke;
  for (const FlightRecorderTarget& t : targets) {
    const std::string pipe = flight_recorder_pipe(t.worker_dir, t.rank);
    if (!is_fifo(pipe)) continue;
    const FlightRecorderPoke::Before before = look(flight_recorder_dump(t.worker_dir, t.rank));
    // Non-blocking: with no reader (the rank is gone) open fails with ENXIO instead of waiting.
    const int fd = ::open(pipe.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    if (::write(fd, "1", 1) == 1) {
      poke.ranks.push_back(t.rank);
      poke.before.push_back(before);
    }
    ::close(fd);
  }
  return poke;
}

std::vector<int> wait_for_flight_recorder_dumps(const std::vector<FlightRecorderTarget>& targets,
                                                const FlightRecorderPoke& poke,
                                                std::chrono::milliseconds limit, proc::Reader& proc,
                                                const rendezvous::Clock& clock) {
  const auto deadline = clock.now() + limit;
  std::vector<bool> done(poke.ranks.size(), false);
  std::vector<bool> given_up(poke.ranks.size(), false);  // gone: no dump will come
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < poke.ranks.size(); ++i) {
      if (done[i] || given_up[i]) continue;
      const FlightRecorderTarget* t = target_of(targets, poke.ranks[i]);
      done[i] = t != nullptr && complete(*t, poke.before[i], proc);
      given_up[i] = !done[i] && (t == nullptr || gone(t->pid, proc));
      all = all && (done[i] || given_up[i]);
    }
    if (all || clock.now() >= deadline) break;
    clock.sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<int> complete_ranks;
  for (size_t i = 0; i < poke.ranks.size(); ++i)
    if (done[i]) complete_ranks.push_back(poke.ranks[i]);
  return complete_ranks;
}

std::string flight_recorder_section(const std::vector<FlightRecorderTarget>& targets,
                                    const FlightRecorderPoke& poke,
                                    const std::vector<int>& complete, int world_size) {
  // Dumps of this stall, and any a collective timeout left before it (TORCH_NCCL_DUMP_ON_TIMEOUT).
  std::vector<int> dumped;
  std::vector<int> pending;
  std::string dir;
  std::string example;
  for (const FlightRecorderTarget& t : targets) {
    const bool poked = std::find(poke.ranks.begin(), poke.ranks.end(), t.rank) != poke.ranks.end();
    const bool whole = std::find(complete.begin(), complete.end(), t.rank) != complete.end();
    if (poked && !whole) {
      pending.push_back(t.rank);
      continue;
    }
    if (!look(flight_recorder_dump(t.worker_dir, t.rank)).exists) continue;
    const std::string gathered = gather(t);
    if (gathered.empty()) continue;
    dumped.push_back(t.rank);
    dir = gathered;
    example = flight_recorder_dump(t.worker_dir, t.rank);
  }
  if (poke.ranks.empty() && dumped.empty()) return "";
  std::string text = "Flight Recorder (PyTorch's NCCL trace):\n";
  if (!poke.ranks.empty())
    text += "  asked " + std::string(poke.ranks.size() == 1 ? "rank " : "ranks ") +
            format_ranks(poke.ranks) + " to dump through their pipes\n";
  if (!pending.empty())
    text += "  no complete dump from " + std::string(pending.size() == 1 ? "rank " : "ranks ") +
            format_ranks(pending) + " within " +
            std::to_string(kFlightRecorderDumpWait.count() / 1000) +
            " s; one may still appear as <worker dir>/" + kDumpPrefix + "<rank>\n";
  if (dumped.empty()) return text;
  text += "  dumps of " + std::string(dumped.size() == 1 ? "rank " : "ranks ") +
          format_ranks(dumped) + " in " + dir + " (each also in its worker directory, e.g. " +
          example + ")\n";
  text += "  read them with PyTorch's analyzer (PyTorch >= 2.7): torchfrtrace " + dir +
          " --prefix " + kDumpPrefix +
          (static_cast<int>(dumped.size()) < world_size ? " --allow-incomplete-ranks" : "") + "\n";
  return text;
}

}  // namespace acc::launcher
