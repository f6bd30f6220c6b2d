#pragma once

// The acc-launch launchers of this user on this machine, as `stacks` and `top` find them.

#include <string>
#include <vector>

#include "process/proc.h"

namespace acc::launcher {

// Whether the file at `path` exists and belongs to this user.
bool owned_by_me(const std::string& path);

// Whether `pid` is an acc-launch process of this user that launches workers (not a subcommand
// such as `stacks` or `top`, nor this process), as `proc` tells.
bool is_launcher(int pid, proc::Reader& proc = proc::Reader::machine());

// Every such launcher, lowest pid first; the watchdog each one forks looks the same, but is its
// child, and is left out.
std::vector<int> find_launchers(proc::Reader& proc = proc::Reader::machine());

}  // namespace acc::launcher
