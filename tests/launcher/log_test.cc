// Which launcher messages show: --log_level over --quiet over ACC_LOG_LEVEL over info.

#include "output/log.h"

#include <gtest/gtest.h>

#include "acc/common/error.h"

namespace acc::launcher::log {
namespace {

TEST(LogLevelTest, TheFlagThenQuietThenTheEnvironmentThenInfo) {
  struct Case {
    std::optional<std::string> flag;
    bool quiet;
    const char* environment;
    Level expected;
  };
  const Case cases[] = {
      {std::nullopt, false, nullptr, Level::kInfo},
      {std::nullopt, false, "", Level::kInfo},
      {std::nullopt, true, nullptr, Level::kWarning},
      {std::nullopt, true, "debug", Level::kWarning},
      {std::nullopt, false, "debug", Level::kDebug},
      {std::nullopt, false, "trace", Level::kDebug},
      {std::nullopt, false, "warn", Level::kWarning},
      {std::nullopt, false, "warning", Level::kWarning},
      {std::nullopt, false, "err", Level::kError},
      {std::nullopt, false, "critical", Level::kError},
      {std::nullopt, false, "off", Level::kError},  // the error line always shows
      {"debug", true, "error", Level::kDebug},
      {"info", true, nullptr, Level::kInfo},
      {"warning", false, "debug", Level::kWarning},
      {"error", false, nullptr, Level::kError},
  };
  for (const Case& c : cases)
    EXPECT_EQ(choose_level(c.flag, c.quiet, c.environment), c.expected)
        << c.flag.value_or("-") << " quiet=" << c.quiet
        << " env=" << (c.environment ? c.environment : "(unset)");
}

TEST(LogLevelTest, AnUnknownLevelNamesWhereItCameFrom) {
  try {
    choose_level(std::string("warn"), false, nullptr);  // spdlog's names only in the environment
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "--log_level warn: expected debug, info, warning or error");
  }
  try {
    choose_level(std::nullopt, false, "loud");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "ACC_LOG_LEVEL=loud: expected debug, info, warning or error");
  }
}

TEST(LogLevelTest, OnlyMessagesAtOrAboveTheLevelAreEnabled) {
  const Level saved = detail::level;
  detail::level = Level::kWarning;
  EXPECT_FALSE(enabled(Level::kDebug));
  EXPECT_FALSE(enabled(Level::kInfo));
  EXPECT_TRUE(enabled(Level::kWarning));
  EXPECT_TRUE(enabled(Level::kError));
  detail::level = saved;
}

}  // namespace
}  // namespace acc::launcher::log
