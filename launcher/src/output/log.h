#pragma once

// The launcher's own messages (not its workers' output, which goes through output/ untouched):
// one spdlog logger, one format, on stderr.
//
//   acc-launch: <message>            info: notices (--quiet or --log_level warning hides them)
//   acc-launch: warning: <message>
//   acc-launch: error: <message>     the one line a failed acc-launch ends with
//   acc-launch: debug: <message>     only with --log_level debug / ACC_LOG_LEVEL=debug
//
// A message below the level costs one integer comparison: the logger is built on the first
// message that passes, and the formatting overloads format only then. Thread-safe (the store
// server logs from its own thread). Writes retry short writes and EAGAIN, as worker lines do.

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace acc::launcher::log {

enum class Level : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// The level in force: `flag` (--log_level: debug, info, warning or error) when given, else
// warning under --quiet, else ACC_LOG_LEVEL (also spdlog's names, as the runtime reads it: trace,
// warn, err, critical and off, the last two meaning error: the error line always shows), else
// info. Throws ConfigError naming --log_level or ACC_LOG_LEVEL for an unknown level.
Level choose_level(const std::optional<std::string>& flag, bool quiet, const char* environment);

// Sets the level (choose_level with this process's ACC_LOG_LEVEL). Call before other threads
// log; until then the level is info.
void configure(const std::optional<std::string>& flag, bool quiet);

namespace detail {
extern Level level;
void write(Level level, std::string_view message);
}  // namespace detail

inline bool enabled(Level level) {
  return level >= detail::level;
}

inline void debug(std::string_view message) {
  if (enabled(Level::kDebug)) detail::write(Level::kDebug, message);
}
inline void info(std::string_view message) {
  if (enabled(Level::kInfo)) detail::write(Level::kInfo, message);
}
inline void warn(std::string_view message) {
  if (enabled(Level::kWarning)) detail::write(Level::kWarning, message);
}
inline void error(std::string_view message) {
  detail::write(Level::kError, message);
}

// fmt-style, formatted only when the level is on: log::debug("spawned rank {} as {}", r, pid).
template <typename Arg, typename... Args>
void debug(fmt::format_string<Arg, Args...> format, Arg&& arg, Args&&... args) {
  if (enabled(Level::kDebug))
    detail::write(Level::kDebug,
                  fmt::format(format, std::forward<Arg>(arg), std::forward<Args>(args)...));
}
template <typename Arg, typename... Args>
void info(fmt::format_string<Arg, Args...> format, Arg&& arg, Args&&... args) {
  if (enabled(Level::kInfo))
    detail::write(Level::kInfo,
                  fmt::format(format, std::forward<Arg>(arg), std::forward<Args>(args)...));
}

}  // namespace acc::launcher::log
