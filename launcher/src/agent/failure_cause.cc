#include "agent/failure_cause.h"

#include <signal.h>
#include <string.h>

#include <charconv>
#include <cstdio>
#include <regex>
#include <sstream>

namespace acc::launcher {
namespace {

std::optional<std::int64_t> parse_counter(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// "name N" on a line of `text` (memory.events, memory.oom_control, /proc/vmstat).
std::optional<std::int64_t> counter_field(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(name + " ", 0) == 0) return parse_counter(line.substr(name.size() + 1));
  return std::nullopt;
}

std::string cause_signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// What a signal a worker raised on itself usually means.
std::string signal_meaning(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "a crash (invalid memory access)";
    case SIGBUS:
      return "a crash (bad memory access: a truncated mapped file, a full /dev/shm)";
    case SIGABRT:
      return "abort() (a failed assertion, std::terminate, an uncaught C++ exception)";
    case SIGFPE:
      return "a crash (arithmetic error)";
    case SIGILL:
      return "a crash (illegal instruction: a binary built for another CPU)";
    default:
      return "";
  }
}

bool oom_kills_grew(const std::optional<std::int64_t>& before,
                    const std::optional<std::int64_t>& after) {
  return after && *after > before.value_or(0);
}

}  // namespace

std::optional<CgroupPath> memory_cgroup(const std::string& text) {
  std::istringstream lines(text);
  std::optional<CgroupPath> v2;
  for (std::string line; std::getline(lines, line);) {
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.rfind("0::", 0) == 0) {
      v2 = CgroupPath{path, true};
      continue;
    }
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');)
      if (name == "memory") return CgroupPath{path, false};
  }
  return v2;
}

std::optional<std::int64_t> parse_oom_kill(const std::string& text) {
  return counter_field(text, "oom_kill");
}

OomCounters read_oom_counters(const MachineFiles& files) {
  OomCounters counters;
  // A file that is not there reads as "", which none of the parsers below takes for a value.
  counters.machine_oom_kills = counter_field(files.read("proc/vmstat"), "oom_kill");
  const auto cgroup = memory_cgroup(files.read("proc/self/cgroup"));
  if (!cgroup) return counters;
  const std::string dir = std::string("sys/fs/cgroup") + (cgroup->v2 ? "" : "/memory") +
                          (cgroup->path == "/" ? "" : cgroup->path);
  counters.cgroup = cgroup->path;
  counters.cgroup_oom_kills =
      parse_oom_kill(files.read(dir + (cgroup->v2 ? "/memory.events" : "/memory.oom_control")));
  // v1 says "no limit" with a number near 2^63, v2 with "max".
  const auto bytes =
      parse_counter(files.read(dir + (cgroup->v2 ? "/memory.max" : "/memory.limit_in_bytes")));
  if (bytes && *bytes < (std::int64_t{1} << 62)) counters.limit_bytes = bytes;
  return counters;
}

std::string format_bytes(std::int64_t bytes) {
  char text[32];
  if (bytes >= (std::int64_t{10} << 30)) {
    std::snprintf(text, sizeof(text), "%.0f GiB", static_cast<double>(bytes) / (1 << 30));
  } else if (bytes >= (std::int64_t{1} << 30)) {
    std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  } else {
    std::snprintf(text, sizeof(text), "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  }
  return text;
}

std::string explain_failure(const FailureFacts& f) {
  const std::string peak =
      f.peak_rss_kib > 0 ? "; its peak RSS " + format_bytes(std::int64_t{f.peak_rss_kib} << 10)
                         : "";
  if (f.signal == SIGKILL && f.sent_by.empty()) {
    if (oom_kills_grew(f.before.cgroup_oom_kills, f.after.cgroup_oom_kills)) {
      std::string line = "killed by the kernel's OOM killer: the memory cgroup " + f.after.cgroup;
      line += f.after.limit_bytes
                  ? " reached its limit (" + format_bytes(*f.after.limit_bytes) + ")"
                  : " ran out of memory";
      return line + peak;
    }
    if (oom_kills_grew(f.before.machine_oom_kills, f.after.machine_oom_kills))
      return "killed by the kernel's OOM killer: the machine ran out of memory" + peak;
  }
  // What the worker itself said last: the error file's message, else its stderr's tail.
  std::vector<std::string> lines = f.stderr_tail;
  if (!f.error_message.empty()) lines.push_back(f.error_message);
  static const std::regex kCudaOom(
      R"(CUDA out of memory|OutOfMemoryError|CUDA error: out of memory)");
  static const std::regex kNccl(
      R"(NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ncclRemoteError|ncclInvalidUsage|ncclInvalidArgument|DistBackendError|NCCL communicator was aborted|Watchdog caught collective operation timeout)");
  static const std::regex kException(
      R"(^(\[rank\d+\]:\s*)?([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Failure)|KeyboardInterrupt)(:.*)?$)");
  auto last = [&](const std::regex& pattern) -> std::optional<std::string> {
    for (auto it = lines.rbegin(); it != lines.rend(); ++it)
      if (std::regex_search(*it, pattern)) return *it;
    return std::nullopt;
  };
  auto trimmed = [](std::string line) {
    constexpr std::size_t kMax = 200;
    if (line.size() > kMax) line = line.substr(0, kMax) + "...";
    return line;
  };
  if (auto line = last(kCudaOom)) return "CUDA out of memory: " + trimmed(*line);
  if (auto line = last(kNccl)) return "NCCL error: " + trimmed(*line);
  if (auto line = last(kException)) return "Python exception: " + trimmed(*line);
  if (f.signal != 0) {
    const std::string name = cause_signal_name(f.signal);
    if (!f.sent_by.empty()) return name + " from " + f.sent_by;
    const std::string meaning = signal_meaning(f.signal);
    if (!meaning.empty()) return name + ": " + meaning;
    if (f.signal == SIGKILL)
      return "SIGKILL from outside the launcher (not the OOM killer: its counters did not move)" +
             peak;
    return name + " from outside the launcher (the user, a scheduler, another program)";
  }
  return "";
}

}  // namespace acc::launcher
