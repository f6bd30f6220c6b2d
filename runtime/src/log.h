#pragma once

// The runtime's spdlog logger, behind plain functions. log.cc is compiled apart from LibTorch
// (its own target, without LibTorch's include path): a PyTorch wheel's LibTorch ships fmt
// headers of its own version, which would shadow the fmt that spdlog was built with.

#include <memory>
#include <string>

namespace spdlog {
class logger;
}

namespace acc::runtime::detail {

enum class LogLevel { kDebug, kInfo, kWarn };

// A logger writing "[time] [rank R/W] [level] message" to stderr; level from ACC_LOG_LEVEL
// (info when unset).
std::shared_ptr<spdlog::logger> make_logger(int rank, int world_size);

void log(spdlog::logger& logger, LogLevel level, const std::string& message);

}  // namespace acc::runtime::detail
