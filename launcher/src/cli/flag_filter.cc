#include "cli/flag_filter.h"

#include <algorithm>
#include <cstdlib>

namespace acc::launcher {

FlagFilter::FlagFilter(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg.size() < 2 || arg[0] != '-') continue;
    const std::string_view word = std::string_view(arg).substr(0, arg.find('='));
    if (word[1] != '-') {
      // Short flags, alone or combined: CLI11 reads -qh as -q -h.
      if (word.find('h') != std::string_view::npos) all_ = true;
      continue;
    }
    std::string name(word.substr(2));
    std::replace(name.begin(), name.end(), '-', '_');
    if (name == "help" || name == "print_completion") all_ = true;
    named_.push_back(std::move(name));
  }
  std::sort(named_.begin(), named_.end());
}

bool FlagFilter::wants(std::string_view name, bool has_short_name, const std::string& env) const {
  if (all_ || has_short_name) return true;
  if (std::binary_search(named_.begin(), named_.end(), name)) return true;
  return !env.empty() && std::getenv(env.c_str()) != nullptr;
}

}  // namespace acc::launcher
