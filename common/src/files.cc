#include "acc/common/files.h"

#include <fcntl.h>
#include <ftw.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

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

int write_file(const std::string& path, std::string_view text) {
  const UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return errno;
  while (!text.empty()) {
    const ssize_t n = ::write(fd.get(), text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

bool remove_tree(const std::string& path) {
  // nftw, not std::filesystem::remove_all: this runs in LibTorch programs too (the runtime's
  // checkpoints, acc::runtime_launch's agent), and a PyTorch wheel's libtorch.so exports a
  // remove_all of its own that crashes (PyTorch 2.11). Depth first, links not followed.
  auto remove_one = [](const char* name, const struct stat*, int, FTW*) {
    return std::remove(name);
  };
  return ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0 || errno == ENOENT;
}

}  // namespace acc
