#include "remove_tree.h"

#include <cerrno>
#include <cstring>

#include "acc/common/error.h"
#include "acc/common/files.h"

namespace acc::runtime::detail {

void remove_tree(const std::filesystem::path& path) {
  if (!acc::remove_tree(path.string()))
    throw ConfigError(acc::detail::concat("cannot remove ", path.string(), ": ",
                                          std::strerror(errno),
                                          "; check the checkpoint directory's permissions"));
}

}  // namespace acc::runtime::detail
