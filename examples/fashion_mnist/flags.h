#pragma once

// The examples' command lines: "--name value" flags and bare switches, each handled by the
// program's own table, with one clear error for an unknown flag, a missing value or a number that
// is not one.

#include <charconv>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "acc/common/error.h"

namespace acc::examples {

struct Flag {
  std::string name;                             // "--epochs"
  std::function<void(const std::string&)> set;  // given the value ("" for a switch)
  bool switch_only = false;                     // "--resume": takes no value
};

inline void parse_flags(int argc, char** argv, const std::vector<Flag>& flags,
                        const std::string& source) {
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    const Flag* flag = nullptr;
    for (const Flag& f : flags)
      if (f.name == name) flag = &f;
    ACC_CHECK(flag != nullptr, ConfigError, "unknown flag ", name, " (see the top of ", source,
              ")");
    if (flag->switch_only) {
      flag->set("");
      continue;
    }
    ACC_CHECK(i + 1 < argc, ConfigError, name, " needs a value");
    flag->set(argv[++i]);
  }
}

// A whole number of at least `least`, or ConfigError naming the flag.
inline std::int64_t whole_number(const std::string& flag, const std::string& value,
                                 std::int64_t least = 0) {
  std::int64_t number = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, number);
  ACC_CHECK(ec == std::errc() && ptr == end && number >= least, ConfigError, flag, " ", value,
            ": expected a whole number of at least ", least);
  return number;
}

}  // namespace acc::examples
