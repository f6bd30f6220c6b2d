#include "acc/common/int_ranges.h"

#include <algorithm>
#include <cctype>

#include "acc/common/strings.h"

namespace acc {

std::optional<std::vector<int>> parse_int_ranges(const std::string& text) {
  std::string compact;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) compact += c;
  std::vector<int> values;
  for (const std::string& part : split(compact, ',')) {
    if (part.empty()) continue;
    const size_t dash = part.find('-');
    const std::optional<int> first = parse_int(part.substr(0, dash));
    const std::optional<int> last =
        dash == std::string::npos ? first : parse_int(part.substr(dash + 1));
    if (!first || !last || *first < 0 || *last < *first) return std::nullopt;
    if (static_cast<long long>(*last) - *first + values.size() >= kMaxIntRangeValues)
      return std::nullopt;
    for (int v = *first; v <= *last; ++v) values.push_back(v);
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

std::string format_int_ranges(std::vector<int> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::string text;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    if (!text.empty()) text += ',';
    text += std::to_string(values[i]);
    if (j > i) text += '-' + std::to_string(values[j]);
    i = j + 1;
  }
  return text;
}

}  // namespace acc
