#include "acc/config/paths.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace acc::config {
namespace {

// Sets or unsets variables for one test and restores them after.
class ScopedEnv {
 public:
  void set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(DefaultConfigPathTest, HfHomeComesFirst) {
  ScopedEnv env;
  env.set("HF_HOME", "/data/hf");
  env.set("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(default_config_path(), "/data/hf/accelerate/default_config.yaml");
}

TEST(DefaultConfigPathTest, XdgCacheHomeComesSecond) {
  ScopedEnv env;
  env.set("HF_HOME", nullptr);
  env.set("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(default_config_path(), "/xdg/huggingface/accelerate/default_config.yaml");
}

TEST(DefaultConfigPathTest, HomeCacheIsTheFallback) {
  ScopedEnv env;
  env.set("HF_HOME", nullptr);
  env.set("XDG_CACHE_HOME", nullptr);
  env.set("HOME", "/home/ada");
  EXPECT_EQ(default_config_path(), "/home/ada/.cache/huggingface/accelerate/default_config.yaml");
}

TEST(DefaultConfigPathTest, TildeInHfHomeIsExpanded) {
  ScopedEnv env;
  env.set("HF_HOME", "~/hf");
  env.set("HOME", "/home/ada");
  EXPECT_EQ(default_config_dir(), "/home/ada/hf/accelerate");
}

}  // namespace
}  // namespace acc::config
