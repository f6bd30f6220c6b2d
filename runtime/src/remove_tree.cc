#include "remove_tree.h"

#include <ftw.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "acc/common/error.h"

namespace acc::runtime::detail {

void remove_tree(const std::filesystem::path& path) {
  auto remove_one = [](const char* name, const struct stat*, int, FTW*) {
    return std::remove(name);
  };
  if (nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
    throw ConfigError(acc::detail::concat("cannot remove ", path.string(), ": ",
                                          std::strerror(errno),
                                          "; check the checkpoint directory's permissions"));
}

}  // namespace acc::runtime::detail
