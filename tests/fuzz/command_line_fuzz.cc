// The command line (launcher/src/cli/cli.cc, parse_launch_args): the bytes are split into
// arguments at each NUL, as the kernel hands argv to acc-launch, and parsed as the arguments
// after `acc-launch [launch]`. The parser never throws for bad input (it answers with a message
// and exit code 2), so any exception escaping is a bug, as is a crash.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "acc/launcher/cli/cli.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty() && args.size() < 64) {
    const std::size_t nul = rest.find('\0');
    args.emplace_back(rest.substr(0, nul));
    rest.remove_prefix(nul == std::string_view::npos ? rest.size() : nul + 1);
  }
  const acc::launcher::ParseResult result = acc::launcher::parse_launch_args(args);
  // A result is either options to launch with or a message and an exit code.
  if (result.exit_now && result.exit_code != 0 && result.message.empty()) std::abort();
  return 0;
}
