#pragma once

// Edits of one field of a JSON object's text, for the tests that feed the readers of the store's
// JSON (nodes/store_json.h) a value a writer of another version, or a broken one, could leave.

#include <nlohmann/json.hpp>
#include <string>

namespace acc::launcher {

// `text` with the field at `pointer` ("/calls/0/seq") set to `value`.
inline std::string with_field(const std::string& text, const std::string& pointer,
                              const nlohmann::json& value) {
  nlohmann::json object = nlohmann::json::parse(text);
  object[nlohmann::json::json_pointer(pointer)] = value;
  return object.dump();
}

// `text` without the field at `pointer`, which an object holds.
inline std::string without_field(const std::string& text, const std::string& pointer) {
  nlohmann::json object = nlohmann::json::parse(text);
  const nlohmann::json::json_pointer field(pointer);
  object[field.parent_pointer()].erase(field.back());
  return object.dump();
}

}  // namespace acc::launcher
