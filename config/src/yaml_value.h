#pragma once

// YAML text to Value, resolving plain scalars as PyYAML's SafeLoader does (YAML 1.1), or as
// json.load does for JSON files. Internal to acc::config.

#include <string>
#include <vector>

#include "acc/config/value.h"

namespace acc::config::detail {

// Parses `text`; `json_numbers` reads 1e8 as a number (json.load) instead of a string (PyYAML).
// Duplicate keys keep the last value, as PyYAML does, and add a line to `warnings`.
// Throws ConfigError "PATH:LINE:COL: YAML syntax error: ..." for text that is not YAML.
Value parse_yaml(const std::string& text, const std::string& path, bool json_numbers,
                 std::vector<std::string>& warnings);

// Resolves one plain (unquoted) scalar the way PyYAML does.
Value resolve_plain_scalar(const std::string& text, bool json_numbers);

// Whether a string must be quoted for PyYAML to read it back as the same string.
bool needs_quotes(const std::string& text);

}  // namespace acc::config::detail
