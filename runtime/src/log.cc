#include "log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

namespace acc::runtime::detail {

std::shared_ptr<spdlog::logger> make_logger(int rank, int world_size) {
  auto logger =
      std::make_shared<spdlog::logger>("acc", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("[%H:%M:%S.%e] [rank " + std::to_string(rank) + "/" +
                      std::to_string(world_size) + "] [%l] %v");
  const char* level = std::getenv("ACC_LOG_LEVEL");
  logger->set_level(level != nullptr ? spdlog::level::from_str(level) : spdlog::level::info);
  return logger;
}

void log(spdlog::logger& logger, LogLevel level, const std::string& message) {
  switch (level) {
    case LogLevel::kDebug:
      logger.debug(message);
      break;
    case LogLevel::kInfo:
      logger.info(message);
      break;
    case LogLevel::kWarn:
      logger.warn(message);
      break;
  }
}

}  // namespace acc::runtime::detail
