#pragma once

// The examples' command lines: "--name value" flags and bare switches, each handled by the
// program's own table, with one clear error for an unknown flag, a missing value or a number that
// is not one.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "acc/common/error.h"
#include "acc/common/strings.h"

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
inline int whole_number(const std::string& flag, const std::string& value, int least = 0) {
  const std::optional<int> number = parse_int(value);
  ACC_CHECK(number && *number >= least, ConfigError, flag, " ", value,
            ": expected a whole number of at least ", least);
  return *number;
}

}  // namespace acc::examples
