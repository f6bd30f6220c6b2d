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

bool pass_on_error_file(const std::string& from, const std::string& to, int exit_code) {
  std::ifstream in(from);
  if (!in) return false;
  nlohmann::json root = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!root.is_object()) return false;
  // A worker killed by a signal could not write its code: PyTorch overrides it the same way.
  const auto message = root.find("message");
  if (exit_code != 0 && message != root.end() && message->is_object())
    (*message)["errorCode"] = exit_code;
  std::error_code ec;
  std::filesystem::remove(to, ec);
  std::ofstream out(to);
  out << root.dump();
  out.close();
  return static_cast<bool>(out);
}

}  // namespace acc::launcher
