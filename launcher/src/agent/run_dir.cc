#include "agent/run_dir.h"

#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "acc/common/error.h"
#include "acc/common/files.h"

namespace acc::launcher {
namespace fs = std::filesystem;
namespace {

// Whether any worker's output goes to files of the run directory (--redirects, --tee).
bool writes_log_files(const LaunchPlan& plan) {
  return std::any_of(plan.workers.begin(), plan.workers.end(), [&](const WorkerSpec& w) {
    return plan.redirects.mask_for(w.local_rank) != 0 || plan.tee.mask_for(w.local_rank) != 0;
  });
}

// Where a temporary run directory goes: the temporary directory the user named ($TMPDIR, or the
// other variables std::filesystem::temp_directory_path reads), else a tmpfs with room
// (/dev/shm), else /tmp. Why not /tmp first: a run directory is a dozen directories (the run's,
// the attempt's, the Python hook's, one per worker) that a short job keeps for milliseconds, and
// on a disk file system each is an inode allocation and, at its removal, a freed block; with the
// `discard` mount option that is a synchronous discard, 3.4 ms per rmdir on the 2-core bench VM,
// 37 ms of a 60 ms launch of 8 x /bin/true (bench/README.md). On a tmpfs both cost microseconds.
// Worker logs can be large, so a run that writes them (--redirects, --tee) stays on disk, as does
// one where /dev/shm is small or full (a container's 64 MiB one): its progress files are mapped
// by the workers, and a full tmpfs would fault their writes.
fs::path temporary_base(const LaunchPlan& plan) {
  for (const char* name : {"TMPDIR", "TMP", "TEMP", "TEMPDIR"})
    if (const char* value = std::getenv(name); value && *value) return fs::temp_directory_path();
  constexpr uint64_t kRoomNeeded = 256ull << 20;
  struct statfs shm {};
  if (!writes_log_files(plan) && ::statfs("/dev/shm", &shm) == 0 && shm.f_type == TMPFS_MAGIC &&
      static_cast<uint64_t>(shm.f_bavail) * shm.f_bsize >= kRoomNeeded &&
      ::access("/dev/shm", W_OK | X_OK) == 0)
    return "/dev/shm";
  return fs::temp_directory_path();
}

std::string make_run_dir(const LaunchPlan& plan) {
  fs::path base = plan.log_dir.empty() ? temporary_base(plan) : fs::path(plan.log_dir);
  std::error_code ec;
  fs::create_directories(base, ec);
  std::string pattern =
      (base / ((plan.log_dir.empty() ? "acc-launch-" : "") + plan.run_id + "_XXXXXX")).string();
  ACC_CHECK(::mkdtemp(pattern.data()) != nullptr, SystemError, "cannot create a log directory in ",
            base.string(), ": ", std::strerror(errno));
  return pattern;
}

}  // namespace

RunDir::RunDir(const LaunchPlan& plan) : path_(make_run_dir(plan)), named_(!plan.log_dir.empty()) {}

void RunDir::finish(const std::function<void(const std::string&)>& notice) const {
  if (stays()) {
    notice("logs in " + path_);
  } else {
    remove_tree(path_);
  }
}

}  // namespace acc::launcher
