#pragma once

// Integer lists written as ranges, as the kernel writes CPU lists and users write GPU and rank
// lists: "0-3,8,10-11". Pure functions; thread-safe.

#include <optional>
#include <string>
#include <vector>

namespace acc {

// The most values one list may expand to: a typo such as "0-99999999" is refused, not allocated.
inline constexpr int kMaxIntRangeValues = 1 << 20;

// "0-3, 8" -> {0, 1, 2, 3, 8}: sorted, without duplicates; spaces and empty items are ignored.
// std::nullopt when an item is not N or N-M with 0 <= N <= M, or the list expands to more than
// kMaxIntRangeValues values.
std::optional<std::vector<int>> parse_int_ranges(const std::string& text);

// {0, 1, 2, 3, 8} -> "0-3,8" (sorted and deduplicated first); {} -> "".
std::string format_int_ranges(std::vector<int> values);

}  // namespace acc
