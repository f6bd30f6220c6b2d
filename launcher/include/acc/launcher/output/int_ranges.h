#pragma once

// Sets of small integers written as ranges, the way sysfs writes CPU lists ("0-3,8-11") and the
// way collapsed console lines name their ranks ("[rank0-3,5]").

#include <optional>
#include <string>
#include <vector>

namespace acc::launcher {

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}, sorted, without duplicates; whitespace and a trailing
// newline are ignored. nullopt for anything else (a descending range, a word).
std::optional<std::vector<int>> parse_int_ranges(const std::string& text);

// {0,1,2,3,5} -> "0-3,5". The input need not be sorted; duplicates are ignored.
std::string format_int_ranges(std::vector<int> values);

}  // namespace acc::launcher
