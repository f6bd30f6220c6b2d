#pragma once

// How a flag name becomes CLI11 option names.

#include <algorithm>
#include <string>

namespace acc::launcher {

// "config_file" -> "--config_file,--config-file": both spellings are accepted (torchrun 2.x and
// Accelerate take either), and CLI11 names an option by its first long name in its messages, so
// an error names the flag with underscores, as the documentation spells it.
inline std::string flag_spellings(const std::string& name) {
  std::string dashed = name;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  return dashed == name ? "--" + name : "--" + name + ",--" + dashed;
}

}  // namespace acc::launcher
