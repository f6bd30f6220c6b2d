#include "acc/common/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "acc/common/unique_fd.h"

namespace acc {

std::string read_file(const std::string& path) {
  std::string text;
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace acc
