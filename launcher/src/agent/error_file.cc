#include "agent/error_file.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

namespace acc::launcher {

std::optional<WorkerError> read_error_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  try {
    // JSON is YAML's flow style, so yaml-cpp, which the launcher has for configs, reads it.
    const YAML::Node root = YAML::LoadFile(path);
    const YAML::Node message = root["message"];
    WorkerError error;
    if (message.IsScalar()) {
      error.message = message.as<std::string>();
    } else if (message.IsMap()) {
      if (message["message"]) error.message = message["message"].as<std::string>();
      const YAML::Node extra = message["extraInfo"];
      if (extra && extra["py_callstack"]) error.traceback = extra["py_callstack"].as<std::string>();
    }
    return error;
  } catch (const std::exception&) {
    return WorkerError{"(unreadable error file " + path + ")", ""};
  }
}

}  // namespace acc::launcher
