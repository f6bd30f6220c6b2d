#include "agent/error_file.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace acc::launcher {
namespace {

std::string text_at(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

std::optional<WorkerError> read_error_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  std::ifstream in(path);
  const nlohmann::json root = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!root.is_object() || !root.contains("message"))
    return WorkerError{"(unreadable error file " + path + ")", ""};
  // A string, or PyTorch's {"message": "Type: msg", "extraInfo": {"py_callstack": "..."}}.
  const nlohmann::json& message = root["message"];
  WorkerError error;
  if (message.is_string()) {
    error.message = message.get<std::string>();
  } else if (message.is_object()) {
    error.message = text_at(message, "message");
    const auto extra = message.find("extraInfo");
    if (extra != message.end() && extra->is_object())
      error.traceback = text_at(*extra, "py_callstack");
  }
  return error;
}

}  // namespace acc::launcher
