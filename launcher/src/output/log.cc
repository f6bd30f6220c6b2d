#include "output/log.h"

#include <unistd.h>

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>

#include <cstdlib>
#include <memory>
#include <mutex>

#include "acc/common/error.h"
#include "output/console.h"

namespace acc::launcher::log {

namespace detail {
Level level = Level::kInfo;
}  // namespace detail

namespace {

// Through write_all rather than spdlog's stderr sink (stdio): the agent's terminal may be
// non-blocking, and a message must not be lost to EAGAIN between two worker lines.
class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t line;
    formatter_->format(message, line);
    write_all(STDERR_FILENO, std::string_view(line.data(), line.size()));
  }
  void flush_() override {}
};

// `%*`: "warning: ", "error: ", "debug: ", or nothing for info (a notice reads as a sentence).
class LevelPrefix final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& message, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string_view prefix = message.level == spdlog::level::warn    ? "warning: "
                                    : message.level == spdlog::level::err   ? "error: "
                                    : message.level == spdlog::level::debug ? "debug: "
                                                                            : "";
    dest.append(prefix.data(), prefix.data() + prefix.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<LevelPrefix>();
  }
};

spdlog::logger& logger() {
  static spdlog::logger* const instance = [] {
    auto sink = std::make_shared<StderrSink>();
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<LevelPrefix>('*').set_pattern("%n: %*%v");
    sink->set_formatter(std::move(formatter));
    // Never destroyed: the store server's thread may log while static destructors run.
    auto* made = new spdlog::logger("acc-launch", std::move(sink));
    made->set_level(spdlog::level::trace);  // the level is ours (log.h), checked before this
    return made;
  }();
  return *instance;
}

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarning:
      return spdlog::level::warn;
    case Level::kError:
      break;
  }
  return spdlog::level::err;
}

std::optional<Level> parse(std::string_view name, bool spdlog_names) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warning") return Level::kWarning;
  if (name == "error") return Level::kError;
  if (!spdlog_names) return std::nullopt;
  if (name == "trace") return Level::kDebug;
  if (name == "warn") return Level::kWarning;
  if (name == "err" || name == "critical" || name == "off") return Level::kError;
  return std::nullopt;
}

}  // namespace

Level choose_level(const std::optional<std::string>& flag, bool quiet, const char* environment) {
  if (flag) {
    const std::optional<Level> level = parse(*flag, false);
    ACC_CHECK(level, ConfigError, "--log_level ", *flag,
              ": expected debug, info, warning or error");
    return *level;
  }
  if (quiet) return Level::kWarning;
  if (environment == nullptr || *environment == '\0') return Level::kInfo;
  const std::optional<Level> level = parse(environment, true);
  ACC_CHECK(level, ConfigError, "ACC_LOG_LEVEL=", environment,
            ": expected debug, info, warning or error");
  return *level;
}

void configure(const std::optional<std::string>& flag, bool quiet) {
  detail::level = choose_level(flag, quiet, std::getenv("ACC_LOG_LEVEL"));
}

namespace detail {

void write(Level level, std::string_view message) {
  logger().log(to_spdlog(level), message);
}

}  // namespace detail

}  // namespace acc::launcher::log
