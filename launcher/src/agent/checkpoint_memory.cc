#include "agent/checkpoint_memory.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "acc/common/files.h"

namespace acc::launcher {
namespace {

// The job-long helper: acc_launch.checkpoint's serve, its error lines on its stdout (the log).
constexpr char kHelperCode[] =
    "import sys; sys.stderr = sys.stdout; from acc_launch.checkpoint import _main; "
    "sys.exit(_main(sys.argv[1:]))";
constexpr char kLog[] = "/persist.log";
constexpr char kLibaccLog[] = "/persist-libacc.log";
// The count of writes the job-long helper has done (python/acc_launch/checkpoint.py, serve).
constexpr char kWritesDone[] = "/persist.done";
constexpr std::chrono::milliseconds kPoll{100};
// Until the first save is written: how often the launcher looks for it.
constexpr std::chrono::milliseconds kFirstLook{1000};

}  // namespace

long number_in(std::string_view name, std::string_view prefix, std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size() || name.substr(0, prefix.size()) != prefix ||
      name.substr(name.size() - suffix.size()) != suffix)
    return -1;
  const std::string digits(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18) return -1;
  return std::strtol(digits.c_str(), nullptr, 10);
}

bool wants_checkpoint_memory(const LaunchPlan& plan) {
  return !plan.workers.empty();
}

CheckpointMemory::CheckpointMemory(Os& os, std::string dir, std::string python,
                                   std::string pythonpath, std::chrono::milliseconds interval,
                                   int keep, Notice notice)
    : os_(os), dir_(std::move(dir)), interval_(interval), notice_(std::move(notice)) {
  const std::string env = os_.find_program("env");
  if (!python.empty() && !env.empty())
    python_helper_ = {
        env,      "PYTHONPATH=" + pythonpath, std::move(python), "-c", kHelperCode, "serve", dir_,
        "--keep", std::to_string(keep)};
  if (const std::string launcher = os_.proc().executable(); !launcher.empty())
    libacc_helper_ = {launcher, kPersistStateCommand, dir_, "--keep", std::to_string(keep)};
  next_background_ = os_.now() + interval_;
}

CheckpointMemory::~CheckpointMemory() {
  for (const pid_t helper : {running_, serving_})
    if (helper > 0) os_.signal_process(helper, SIGTERM);
}

CheckpointMemory::Save CheckpointMemory::newest_save(const std::string& dir) {
  Save newest;
  for (const std::string& name : names_in(dir)) {
    if (const long seq = number_in(name, "rank0.", ".meta"); seq > newest.seq)
      newest = {seq, false};
    if (const long seq = number_in(name, "libacc.", "");
        seq > newest.seq && !read_file(dir + "/" + name + "/saved-for").empty() &&
        access((dir + "/" + name + "/random_states_0.pt").c_str(), F_OK) == 0)
      newest = {seq, true};
  }
  return newest;
}

long CheckpointMemory::persisted_save(const std::string& dir) {
  const std::string text = read_file(dir + "/persisted");
  return std::max(0L, number_in(text.substr(0, text.find('\n')), "", ""));
}

bool CheckpointMemory::writing() const {
  return running_ > 0 ||
         (serving_ > 0 && number_in(read_file(dir_ + kWritesDone), "", "\n") < asked_);
}

void CheckpointMemory::persist() {
  if (writing()) return;
  const Save newest = newest_save(dir_);
  if (newest.seq == 0 || newest.seq <= persisted_save(dir_)) return;
  if (newest.libacc) {
    if (libacc_helper_.empty()) return;
    running_ = os_.start_program(libacc_helper_, dir_ + kLibaccLog);
    if (running_ < 0) notice_("checkpoint: cannot start " + libacc_helper_[0] + " to write a save");
    return;
  }
  if (python_helper_.empty()) return;
  if (serving_ > 0 && os_.signal_process(serving_, SIGUSR1)) {
    ++asked_;
    return;
  }
  std::remove((dir_ + kWritesDone).c_str());
  serving_ = os_.start_program(python_helper_, dir_ + kLog);
  asked_ = 1;
  heard_ = 0;
  if (serving_ < 0) notice_("checkpoint: cannot start " + python_helper_[2] + " to write a save");
}

bool CheckpointMemory::say_lines(const std::string& log) {
  const std::string text = read_file(log);
  bool any = false;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    constexpr std::string_view kOurs = "acc-launch: ";
    if (line.substr(0, kOurs.size()) == kOurs) line.remove_prefix(kOurs.size());
    // A write that fails as the last one did says nothing new.
    if (!line.empty() && said_.insert(std::string(line)).second) notice_(std::string(line));
    any = any || !line.empty();
    start = end + 1;
  }
  return any;
}

void CheckpointMemory::reap(pid_t& helper, const char* log, int status) {
  helper = -1;
  if (!say_lines(dir_ + log) && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    notice_("checkpoint: the helper writing the newest save ended with " +
            std::string(WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                          : "signal " + std::to_string(WTERMSIG(status))) +
            "; training goes on with the copy in memory");
}

void CheckpointMemory::check_helpers() {
  if (running_ > 0)
    if (const std::optional<int> status = os_.exit_status(running_))
      reap(running_, kLibaccLog, *status);
  if (serving_ > 0) {
    if (const std::optional<int> status = os_.exit_status(serving_)) {
      reap(serving_, kLog, *status);
    } else if (heard_ < asked_ && !writing()) {
      heard_ = asked_;
      say_lines(dir_ + kLog);
    }
  }
}

void CheckpointMemory::tick() {
  check_helpers();
  // The first save is written at once, so that PATH holds one early; then every interval.
  const bool first = !written_any_ && !writing() && newest_save(dir_).seq > 0;
  if (first || (interval_.count() > 0 && os_.now() >= next_background_)) {
    next_background_ = os_.now() + interval_;
    written_any_ = true;
    persist();
  }
}

std::optional<CheckpointMemory::Clock::time_point> CheckpointMemory::next_wake() const {
  std::optional<Clock::time_point> wake;
  if (interval_.count() > 0) wake = next_background_;
  if (!written_any_)
    wake = std::min(wake.value_or(Clock::time_point::max()), os_.now() + kFirstLook);
  if (writing()) wake = std::min(wake.value_or(Clock::time_point::max()), os_.now() + kPoll);
  return wake;
}

void CheckpointMemory::persist_and_wait(std::chrono::milliseconds limit,
                                        const std::function<bool(int)>& stops_the_job) {
  const Clock::time_point deadline = os_.now() + limit;
  bool stopped = false;
  // A write under way may hold an older save than the newest: once it is done, persist() once
  // more (it starts nothing where the newest is written already).
  bool again = writing();
  persist();
  for (check_helpers(); writing() || (std::exchange(again, false) && (persist(), writing()));
       check_helpers()) {
    if (stopped || os_.now() >= deadline) {
      notice_("checkpoint: the newest save was not written to storage (" +
              std::string(stopped ? "stopped" : "it took too long") + ")");
      for (pid_t* helper : {&running_, &serving_})
        if (*helper > 0) os_.signal_process(std::exchange(*helper, -1), SIGTERM);
      return;
    }
    std::vector<pollfd> none;
    for (int sig : os_.wait(none, std::min(deadline, os_.now() + kPoll)))
      stopped = stopped || stops_the_job(sig);
  }
}

}  // namespace acc::launcher
