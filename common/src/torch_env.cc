#include "acc/common/torch_env.h"

#include <algorithm>
#include <cctype>

namespace acc::torch_env {
namespace {

struct Name {
  const char* name;
  Version since;  // the first version that reads it
  Version until;  // the first that no longer does (without a warning); {0, 0}: none yet
  const char* setting;
};

constexpr Name kNames[] = {
    {"NCCL_ASYNC_ERROR_HANDLING", {0, 0}, {2, 2}, "async_error_handling"},
    {"TORCH_NCCL_ASYNC_ERROR_HANDLING", {2, 2}, {0, 0}, "async_error_handling"},
    {"TORCH_NCCL_TRACE_BUFFER_SIZE", {2, 2}, {2, 7}, "fr_buffer_size"},
    {"TORCH_FR_BUFFER_SIZE", {2, 7}, {0, 0}, "fr_buffer_size"},
    {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", {2, 2}, {2, 7}, "fr_dump_file"},
    {"TORCH_FR_DUMP_TEMP_FILE", {2, 7}, {0, 0}, "fr_dump_file"},
    {"TORCH_NCCL_DUMP_ON_TIMEOUT", {2, 2}, {0, 0}, "dump_on_timeout"},
    {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", {2, 2}, {0, 0}, "dump_pipe"},
};

bool before(const Version& a, const Version& b) {
  return a.major != b.major ? a.major < b.major : a.minor < b.minor;
}

const Name* find(const std::string& name) {
  for (const Name& n : kNames)
    if (name == n.name) return &n;
  return nullptr;
}

// A run of digits at `at`, advanced past; nullopt when there is none.
std::optional<int> number(std::string_view text, size_t& at) {
  const size_t begin = at;
  while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])) && at - begin < 6)
    ++at;
  if (at == begin) return std::nullopt;
  return std::stoi(std::string(text.substr(begin, at - begin)));
}

}  // namespace

std::optional<Version> parse_version(std::string_view text) {
  size_t at = 0;
  const auto major = number(text, at);
  if (!major || at >= text.size() || text[at] != '.') return std::nullopt;
  ++at;
  const auto minor = number(text, at);
  if (!minor) return std::nullopt;
  return Version{*major, *minor};
}

std::optional<Version> parse_version_py(std::string_view text) {
  for (size_t at = text.find("__version__"); at != std::string_view::npos;
       at = text.find("__version__", at + 1)) {
    if (at != 0 && text[at - 1] != '\n') continue;
    size_t quote = text.find_first_of("'\"", at);
    const size_t end_of_line = text.find('\n', at);
    if (quote == std::string_view::npos || quote > end_of_line) continue;
    const size_t close = text.find(text[quote], quote + 1);
    if (close == std::string_view::npos || close > end_of_line) continue;
    return parse_version(text.substr(quote + 1, close - quote - 1));
  }
  return std::nullopt;
}

bool reads(const std::string& name, const std::optional<Version>& version) {
  const Name* n = find(name);
  if (n == nullptr) return false;
  if (!version) return true;
  const bool until_none = n->until.major == 0 && n->until.minor == 0;
  return !before(*version, n->since) && (until_none || before(*version, n->until));
}

std::vector<std::string> names_of_setting(const std::string& name) {
  const Name* n = find(name);
  if (n == nullptr) return {name};
  std::vector<std::string> names;
  for (const Name& other : kNames)
    if (std::string_view(other.setting) == n->setting) names.emplace_back(other.name);
  return names;
}

bool is_set(const std::map<std::string, std::string>& environment, const std::string& name) {
  const std::vector<std::string> names = names_of_setting(name);
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& each) { return environment.count(each) > 0; });
}

std::vector<std::string> superfluous(const std::map<std::string, std::string>& environment,
                                     const Version& version) {
  std::vector<std::string> drop;
  for (const Name& n : kNames) {
    if (!environment.count(n.name) || reads(n.name, version)) continue;
    for (const std::string& other : names_of_setting(n.name))
      if (other != n.name && environment.count(other) && reads(other, version)) {
        drop.emplace_back(n.name);
        break;
      }
  }
  return drop;
}

}  // namespace acc::torch_env
