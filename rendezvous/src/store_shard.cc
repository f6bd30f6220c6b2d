#include "store_shard.h"

#include <linux/close_range.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace acc::rendezvous::detail {

std::string use_own_descriptor_table(std::vector<int> keep) {
  if (::unshare(CLONE_FILES) != 0) {
    return "cannot give the store's thread a descriptor table of its own (unshare): " +
           std::string(std::strerror(errno));
  }
  keep.push_back(2);  // 0, 1 and 2 stay: the log goes to stderr
  std::sort(keep.begin(), keep.end());
  unsigned first = 3;
  for (int fd : keep) {
    if (fd < 0 || static_cast<unsigned>(fd) < first) continue;
    if (static_cast<unsigned>(fd) > first) {
      ::syscall(SYS_close_range, first, static_cast<unsigned>(fd) - 1, 0u);
    }
    first = static_cast<unsigned>(fd) + 1;
  }
  ::syscall(SYS_close_range, first, UINT_MAX, 0u);
  return {};
}

}  // namespace acc::rendezvous::detail
