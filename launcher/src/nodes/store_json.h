#pragma once

// The values one launcher leaves for the others in node 0's store (a job's end, a node's straggler
// timings, a rank's collective trace) as JSON: one object holding the value's fields and its
// format's "format" and "version". They are read back strictly, because a launcher acts on what it
// reads (an exit status, a straggler verdict, the stuck collective): a value of another format or
// version, one that is not JSON or is cut short, and one whose fields are not exactly those the
// writer gives (a field missing or unknown, a string, a bool or a fraction where an integer goes,
// a negative count) read as nothing, never as a default. T needs nlohmann's to_json and from_json,
// which the file of its format defines (NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE). Pure.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "acc/common/error.h"

namespace acc::launcher {

// A format's name and version: {"acc-trace", 2}.
struct StoreFormat {
  const char* name;
  int version;
};

// `value` as one line of JSON (no newline), tagged with `format`. A string that is not UTF-8
// (a host name, a caller's file name) has its bad bytes replaced (U+FFFD), never thrown.
template <typename T>
std::string to_store_json(const T& value, StoreFormat format) {
  nlohmann::json object = value;
  ACC_ASSERT(object.is_object() && !object.contains("format") && !object.contains("version"));
  object["format"] = format.name;
  object["version"] = format.version;
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The value to_store_json() wrote with `format`; nullopt for anything else (above).
template <typename T>
std::optional<T> from_store_json(std::string_view text, StoreFormat format) {
  try {
    nlohmann::json object = nlohmann::json::parse(text);
    if (!object.is_object() || object.at("format") != nlohmann::json(format.name) ||
        object.at("version") != nlohmann::json(format.version))
      return std::nullopt;
    object.erase("format");
    object.erase("version");
    T value = object.get<T>();
    // nlohmann converts any number or bool to an integer field (true -> 1, 2.5 -> 2, -1 -> 2^64-1)
    // and ignores unknown fields: a value that does not write back as the text of the object it
    // was read from was not written by to_store_json(). The texts, not the objects, are compared:
    // json's == finds -1 equal to 2^64-1.
    if (nlohmann::json(value).dump() != object.dump()) return std::nullopt;
    return value;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

}  // namespace acc::launcher
