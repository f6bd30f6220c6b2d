#include "acc/config/paths.h"

#include <sys/stat.h>

#include <cstdlib>

namespace acc::config {
namespace {

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

std::string expand_user(const std::string& path) {
  if (path.empty() || path[0] != '~') return path;
  if (path.size() > 1 && path[1] != '/') return path;  // ~user is left as Python leaves it unknown
  return env_or_empty("HOME") + path.substr(1);
}

std::string default_config_dir() {
  std::string hf_home = env_or_empty("HF_HOME");
  if (hf_home.empty()) {
    std::string xdg = env_or_empty("XDG_CACHE_HOME");
    hf_home = (xdg.empty() ? std::string("~/.cache") : xdg) + "/huggingface";
  }
  return expand_user(hf_home) + "/accelerate";
}

std::string default_config_path() {
  return default_config_dir() + "/default_config.yaml";
}

bool file_exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

}  // namespace acc::config
