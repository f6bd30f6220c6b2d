#pragma once

// `acc-launch stacks` (commands.h) over an Os: the launchers it finds in its /proc, the signal it
// sends them, and the wait for their reports on its clock. Its tests run it over a fake Os.

#include <string>
#include <vector>

#include "process/os.h"

namespace acc::launcher {

// As run_stacks_command(args), through `os`. Writes the reports to stdout. Without a pid, of
// several launchers started from this session or this directory, lists them on stderr and
// returns 2, signalling none. Throws ConfigError for a bad pid or no launcher (none of this
// user's, or none started here), LaunchError when a launcher ends before its report,
// TimeoutError when none comes in 30 s of `os`'s clock.
int run_stacks_command(const std::vector<std::string>& args, Os& os);

}  // namespace acc::launcher
