#pragma once

// Small string helpers every module uses: one definition each, so "12x" or " 3" means the same
// thing to every flag and file that reads a number. Pure functions; thread-safe; none throws
// except through std::bad_alloc. Compiles as C++17 (the runtime's users build with it).

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace acc {

// "a,,b" split on ',' -> {"a", "", "b"}; "" -> {}. A trailing separator gives no empty last part
// (as std::getline reads it), so "a," -> {"a"}.
std::vector<std::string> split(std::string_view text, char separator);

// {"a", "b"} joined with ", " -> "a, b".
std::string join(const std::vector<std::string>& parts, std::string_view separator);
std::string join(const std::vector<std::string_view>& parts, std::string_view separator);

// `text` without leading and trailing spaces, tabs, carriage returns and newlines.
std::string trim(std::string_view text);

// ASCII lower case.
std::string to_lower(std::string_view text);
// ASCII upper case.
std::string to_upper(std::string_view text);

bool starts_with(std::string_view text, std::string_view prefix);
bool ends_with(std::string_view text, std::string_view suffix);

// Every `from` in `text` replaced by `to`, left to right, never rescanning a replacement.
// An empty `from` returns `text` unchanged.
std::string replace_all(std::string text, std::string_view from, std::string_view to);

// `text` fit for one line of a message: control characters as escapes (a newline as \n, a tab as
// \t, ESC as \x1b), everything else as it is.
std::string escape_control(std::string_view text);

// Text from elsewhere (a server's reply body, a proxy's page) fit for one line of a message:
// each run of white space (newlines included) as one space, trimmed, other control characters
// escaped, and cut to `limit` bytes with "..." after it.
std::string one_line(std::string_view text, std::size_t limit = 200);

// Whether `text` holds a control character (what escape_control changes).
bool has_control(std::string_view text);

// The whole of `text` as a base-10 int: an optional '-' then digits, nothing else (no spaces, no
// '+', no trailing characters); std::nullopt when it is not one or does not fit in an int.
std::optional<int> parse_int(std::string_view text);

// `value` with exactly `digits` decimals, as printf's "%.*f": fixed(2.345, 1) -> "2.3".
std::string fixed(double value, int digits);
// `value` with the decimals it needs, up to 3 (milliseconds of a second): 1.5 -> "1.5",
// 10 -> "10", 0.25 -> "0.25", 2.0004 -> "2".
std::string decimal(double value);
// A duration in seconds, as decimal() writes them: 1500 ms -> "1.5".
std::string decimal_seconds(std::chrono::milliseconds duration);

}  // namespace acc
