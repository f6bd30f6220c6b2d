#include "agent/run_dir.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "acc/common/error.h"
#include "acc/common/files.h"
#include "output/log.h"

namespace acc::launcher {
namespace fs = std::filesystem;
namespace {

// A temporary run directory's name starts so (then the run id and mkdtemp's letters); its owner
// record is this file in it.
constexpr std::string_view kTemporaryPrefix = "acc-launch-";
constexpr char kOwnerFile[] = "owner";
constexpr std::string_view kOwnerTitle = "acc-launch run directory owner";

// Whether any worker's output goes to files of the run directory (--redirects, --tee).
bool writes_log_files(const LaunchPlan& plan) {
  return std::any_of(plan.workers.begin(), plan.workers.end(), [&](const WorkerSpec& w) {
    return plan.redirects.mask_for(w.local_rank) != 0 || plan.tee.mask_for(w.local_rank) != 0;
  });
}

// Whether the user named a temporary directory ($TMPDIR, or the other variables
// std::filesystem::temp_directory_path reads).
bool temporary_directory_named() {
  for (const char* name : {"TMPDIR", "TMP", "TEMP", "TEMPDIR"})
    if (const char* value = std::getenv(name); value && *value) return true;
  return false;
}

// Where a temporary run directory goes: the temporary directory the user named, else a tmpfs
// with room (/dev/shm), else /tmp. Why not /tmp first: a run directory is a dozen directories (the
// run's, the attempt's, the Python hook's, one per worker) that a short job keeps for
// milliseconds, and on a disk file system each is an inode allocation and, at its removal, a
// freed block; with the `discard` mount option that is a synchronous discard, 3.4 ms per rmdir on
// the 2-core bench VM, 37 ms of a 60 ms launch of 8 x /bin/true (bench/README.md). On a tmpfs both
// cost microseconds. Worker logs can be large, so a run that writes them (--redirects, --tee)
// stays on disk, as does one where /dev/shm is small or full (a container's 64 MiB one): its
// progress files are mapped by the workers, and a full tmpfs would fault their writes.
fs::path temporary_base(const LaunchPlan& plan) {
  if (temporary_directory_named()) return fs::temp_directory_path();
  constexpr uint64_t kRoomNeeded = 256ull << 20;
  struct statfs shm {};
  if (!writes_log_files(plan) && ::statfs("/dev/shm", &shm) == 0 && shm.f_type == TMPFS_MAGIC &&
      static_cast<uint64_t>(shm.f_bavail) * shm.f_bsize >= kRoomNeeded &&
      ::access("/dev/shm", W_OK | X_OK) == 0)
    return "/dev/shm";
  return fs::temp_directory_path();
}

// Every directory temporary_base() may give a launch of this environment, whatever its plan.
std::vector<std::string> temporary_bases() {
  std::error_code error;
  const std::string named = fs::temp_directory_path(error).string();
  if (temporary_directory_named()) return {named};
  std::vector<std::string> bases = {"/dev/shm"};
  if (!named.empty() && named != bases.front()) bases.push_back(named);
  return bases;
}

std::string make_run_dir(const LaunchPlan& plan) {
  fs::path base = plan.log_dir.empty() ? temporary_base(plan) : fs::path(plan.log_dir);
  std::error_code ec;
  fs::create_directories(base, ec);
  ACC_CHECK(!ec, SystemError, "cannot create a log directory ", base.string(), ": ", ec.message());
  const std::string prefix = plan.log_dir.empty() ? std::string(kTemporaryPrefix) : "";
  std::string pattern = (base / (prefix + plan.run_id + "_XXXXXX")).string();
  ACC_CHECK(::mkdtemp(pattern.data()) != nullptr, SystemError, "cannot create a log directory in ",
            base.string(), ": ", std::strerror(errno));
  return pattern;
}

// Whether `path` is, not through a link, a directory (or a regular file) of this user.
bool owned_here(const std::string& path, bool directory) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && st.st_uid == ::geteuid() &&
         (directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

// The owner that the record of the directory `path` names, where both are this user's own.
std::optional<RunDirOwner> recorded_owner(const std::string& path) {
  const std::string record = path + "/" + kOwnerFile;
  if (!owned_here(path, true) || !owned_here(record, false)) return std::nullopt;
  return decode_run_dir_owner(read_file(record));
}

// This process as its run directory's owner; nullopt where /proc cannot say (no sweep could tell
// it ended: its directory gets no record and is never swept).
std::optional<RunDirOwner> this_process(proc::Reader& proc) {
  RunDirOwner self;
  self.pid_space = proc.pid_space();
  self.pid = static_cast<int>(::getpid());
  const proc::Stat stat = proc.stat(self.pid);
  if (self.pid_space.empty() || !stat.ok) return std::nullopt;
  self.start_ticks = stat.start_ticks;
  return self;
}

// Removes a run directory with its owner record last: a launcher killed meanwhile leaves a
// directory the next sweep still recognises.
void remove_run_dir(const std::string& path) {
  for (const std::string& name : names_in(path))
    if (name != kOwnerFile) remove_tree(path + "/" + name);
  remove_tree(path);
}

// `text` without its first line, which must be `line`; nullopt otherwise.
std::optional<std::string_view> after_line(std::string_view text, std::string_view line) {
  if (text.substr(0, line.size()) != line || text.substr(line.size(), 1) != "\n")
    return std::nullopt;
  return text.substr(line.size() + 1);
}

// The value of the line "`key` VALUE" that starts `text` (it moves past it); nullopt otherwise.
std::optional<std::string> take_field(std::string_view& text, std::string_view key) {
  const size_t end = text.find('\n');
  if (end == std::string_view::npos || text.substr(0, key.size()) != key ||
      text.substr(key.size(), 1) != " " || end == key.size() + 1)
    return std::nullopt;
  std::string value(text.substr(key.size() + 1, end - key.size() - 1));
  text.remove_prefix(end + 1);
  return value;
}

// A whole decimal number of at most 19 digits: nothing before it, nothing after.
std::optional<unsigned long long> decimal(const std::string& text) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::strtoull(text.c_str(), nullptr, 10);
}

}  // namespace

std::string encode_run_dir_owner(const RunDirOwner& owner) {
  return std::string(kOwnerTitle) + "\npid_space " + owner.pid_space + "\npid " +
         std::to_string(owner.pid) + "\nstart_ticks " + std::to_string(owner.start_ticks) + "\n";
}

std::optional<RunDirOwner> decode_run_dir_owner(std::string_view text) {
  const std::optional<std::string_view> fields = after_line(text, kOwnerTitle);
  if (!fields) return std::nullopt;
  std::string_view rest = *fields;
  const std::optional<std::string> space = take_field(rest, "pid_space");
  const std::optional<std::string> pid = take_field(rest, "pid");
  const std::optional<std::string> start = take_field(rest, "start_ticks");
  if (!space || !pid || !start || !rest.empty()) return std::nullopt;
  const std::optional<unsigned long long> pid_number = decimal(*pid);
  const std::optional<unsigned long long> start_number = decimal(*start);
  if (!pid_number || *pid_number == 0 || *pid_number > 0x7fffffff || !start_number)
    return std::nullopt;
  return RunDirOwner{*space, static_cast<int>(*pid_number), *start_number};
}

bool run_dir_owner_gone(const RunDirOwner& owner, proc::Reader& proc) {
  const std::string space = proc.pid_space();
  if (space.empty() || owner.pid_space != space) return false;
  const proc::Stat stat = proc.stat(owner.pid);
  return !stat.ok || stat.start_ticks != owner.start_ticks;
}

std::vector<std::string> sweep_run_dirs(const std::string& base, proc::Reader& proc) {
  std::vector<std::string> removed;
  for (const std::string& name : names_in(base, kTemporaryPrefix)) {
    const std::string path = base + "/" + name;
    const std::optional<RunDirOwner> owner = recorded_owner(path);
    if (!owner || !run_dir_owner_gone(*owner, proc)) continue;
    // Claimed by a rename, which one sweeping launcher wins. The new name keeps the prefix and
    // the record: should this launcher be killed before it is gone, the next sweep finds it.
    const std::string claimed = path + ".swept-" + std::to_string(::getpid());
    if (::rename(path.c_str(), claimed.c_str()) != 0) continue;
    remove_run_dir(claimed);
    removed.push_back(path);
  }
  return removed;
}

RunDir::RunDir(const LaunchPlan& plan, proc::Reader& proc)
    : run_id_(plan.run_id), named_(!plan.log_dir.empty()) {
  for (const std::string& base : temporary_bases())
    for (const std::string& path : sweep_run_dirs(base, proc))
      log::debug("removed {}, the run directory of a launcher that is gone", path);
  path_ = make_run_dir(plan);
  if (named_) return;
  if (const std::optional<RunDirOwner> self = this_process(proc))
    write_file(path_ + "/" + kOwnerFile, encode_run_dir_owner(*self));
}

RunDir::~RunDir() {
  for (const std::string& dir : memory_dirs_) remove_run_dir(dir);
  if (!finished_ && !stays()) remove_run_dir(path_);
}

std::string RunDir::make_memory_dir(const std::string& what, proc::Reader& proc) {
  const fs::path base = temporary_directory_named() || ::access("/dev/shm", W_OK | X_OK) != 0
                            ? fs::temp_directory_path()
                            : fs::path("/dev/shm");
  std::string pattern =
      (base / (std::string(kTemporaryPrefix) + run_id_ + "-" + what + "_XXXXXX")).string();
  ACC_CHECK(::mkdtemp(pattern.data()) != nullptr, SystemError, "cannot create a directory in ",
            base.string(), ": ", std::strerror(errno));
  memory_dirs_.push_back(pattern);
  if (const std::optional<RunDirOwner> self = this_process(proc))
    write_file(pattern + "/" + kOwnerFile, encode_run_dir_owner(*self));
  return pattern;
}

void RunDir::keep() {
  if (keep_) return;
  keep_ = true;
  if (!named_) ::unlink((path_ + "/" + kOwnerFile).c_str());
}

void RunDir::finish(const std::function<void(const std::string&)>& notice) {
  if (finished_) return;
  finished_ = true;
  for (const std::string& dir : memory_dirs_) remove_run_dir(dir);
  memory_dirs_.clear();
  if (stays()) {
    notice("logs in " + path_);
  } else {
    remove_run_dir(path_);
  }
}

}  // namespace acc::launcher
