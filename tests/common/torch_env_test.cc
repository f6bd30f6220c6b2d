#include "acc/common/torch_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace acc::torch_env {
namespace {

std::vector<std::string> read_by(const std::optional<Version>& version) {
  std::vector<std::string> names;
  for (const char* name :
       {"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
        "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"})
    if (reads(name, version)) names.emplace_back(name);
  return names;
}

TEST(TorchEnvTest, VersionsParseAsPyTorchSpellsThem) {
  EXPECT_EQ(parse_version("2.11.0+cu130"), (Version{2, 11}));
  EXPECT_EQ(parse_version("1.13.0a0"), (Version{1, 13}));
  EXPECT_EQ(parse_version("2.7"), (Version{2, 7}));
  EXPECT_EQ(parse_version("2.6.0.dev20241112+cpu"), (Version{2, 6}));
  EXPECT_FALSE(parse_version("2"));
  EXPECT_FALSE(parse_version("unknown"));
  EXPECT_FALSE(parse_version(""));
}

TEST(TorchEnvTest, TheVersionComesFromTheVersionLineOfVersionPy) {
  EXPECT_EQ(parse_version_py("from typing import Optional\n\n__all__ = ['__version__', 'debug']\n"
                             "__version__ = '2.11.0+cu130'\ndebug = False\n"),
            (Version{2, 11}));
  EXPECT_EQ(parse_version_py("__version__ = \"1.13.0a0\"\n"), (Version{1, 13}));
  EXPECT_FALSE(parse_version_py("__all__ = ['__version__']\n"));
  EXPECT_FALSE(parse_version_py(""));
}

TEST(TorchEnvTest, PyTorch113ReadsOnlyTheOldAsyncErrorHandlingName) {
  EXPECT_EQ(read_by(Version{1, 13}), (std::vector<std::string>{"NCCL_ASYNC_ERROR_HANDLING"}));
}

TEST(TorchEnvTest, PyTorch22To26ReadTheTorchNcclNames) {
  for (int minor : {2, 4, 6})
    EXPECT_EQ(
        read_by(Version{2, minor}),
        (std::vector<std::string>{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_TRACE_BUFFER_SIZE",
                                  "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_NCCL_DUMP_ON_TIMEOUT",
                                  "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"}))
        << "2." << minor;
}

TEST(TorchEnvTest, PyTorch27AndLaterReadTheFlightRecorderNames) {
  for (const Version version : {Version{2, 7}, Version{2, 11}, Version{3, 0}})
    EXPECT_EQ(read_by(version),
              (std::vector<std::string>{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_FR_BUFFER_SIZE",
                                        "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DUMP_ON_TIMEOUT",
                                        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"}))
        << version.major << "." << version.minor;
}

TEST(TorchEnvTest, AVersionNobodyCouldTellReadsEveryName) {
  EXPECT_EQ(read_by(std::nullopt).size(), 8u);
  EXPECT_FALSE(reads("CUDA_VISIBLE_DEVICES", std::nullopt));
}

TEST(TorchEnvTest, AUsersOldNameCountsAsTheSettingBeingSet) {
  const std::map<std::string, std::string> env = {{"NCCL_ASYNC_ERROR_HANDLING", "0"}};
  EXPECT_TRUE(is_set(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"));
  EXPECT_TRUE(is_set(env, "NCCL_ASYNC_ERROR_HANDLING"));
  EXPECT_FALSE(is_set(env, "TORCH_FR_BUFFER_SIZE"));
  EXPECT_EQ(names_of_setting("TORCH_FR_BUFFER_SIZE"),
            (std::vector<std::string>{"TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE"}));
}

TEST(TorchEnvTest, AWorkerDropsTheNamesItsPyTorchDoesNotReadWhenItReadsAnother) {
  const std::map<std::string, std::string> both = {
      {"NCCL_ASYNC_ERROR_HANDLING", "1"},       {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"}, {"TORCH_FR_BUFFER_SIZE", "2000"},
      {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "d"}, {"TORCH_FR_DUMP_TEMP_FILE", "d"}};
  EXPECT_EQ(superfluous(both, Version{2, 11}),
            (std::vector<std::string>{"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_TRACE_BUFFER_SIZE",
                                      "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}));
  EXPECT_EQ(superfluous(both, Version{2, 4}),
            (std::vector<std::string>{"NCCL_ASYNC_ERROR_HANDLING", "TORCH_FR_BUFFER_SIZE",
                                      "TORCH_FR_DUMP_TEMP_FILE"}));
  // 1.13 reads neither Flight Recorder name: they stay (it ignores them).
  EXPECT_EQ(superfluous(both, Version{1, 13}),
            (std::vector<std::string>{"TORCH_NCCL_ASYNC_ERROR_HANDLING"}));
  // An old name alone is the user's: PyTorch still reads it (with its warning).
  EXPECT_TRUE(superfluous({{"NCCL_ASYNC_ERROR_HANDLING", "0"}}, Version{2, 11}).empty());
}

}  // namespace
}  // namespace acc::torch_env
