#include "torch_names.h"

#include <torch/version.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "acc/common/torch_env.h"

extern char** environ;

namespace acc::runtime::detail {

std::vector<std::string> drop_names_libtorch_ignores() {
  std::map<std::string, std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry)
    if (const char* equals = std::strchr(*entry, '='))
      environment.emplace(std::string(*entry, static_cast<size_t>(equals - *entry)), equals + 1);
  const std::vector<std::string> drop = torch_env::superfluous(
      environment, torch_env::Version{TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR});
  for (const std::string& name : drop) ::unsetenv(name.c_str());
  return drop;
}

}  // namespace acc::runtime::detail
