// Hostfiles and the --include/--exclude grammar (common/src/hostfile.cc): the input up to its
// first NUL is a hostfile, then an --include and an --exclude filter, NUL-separated. ConfigError
// is the parser's answer to bad input; anything else escaping is a bug.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "acc/common/error.h"
#include "acc/common/hostfile.h"

namespace {

std::string next_part(std::string_view& rest) {
  const std::size_t nul = rest.find('\0');
  std::string part(rest.substr(0, nul));
  rest.remove_prefix(nul == std::string_view::npos ? rest.size() : nul + 1);
  return part;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const std::string text = next_part(rest);
  const std::string include = next_part(rest);
  const std::string exclude = next_part(rest);
  try {
    acc::parse_host_filter(include, "--include");
  } catch (const acc::ConfigError&) {
  }
  try {
    const auto hosts = acc::parse_hostfile(text, "fuzz.hostfile");
    acc::select_hosts(hosts, include, exclude);
  } catch (const acc::ConfigError&) {
  }
  return 0;
}
