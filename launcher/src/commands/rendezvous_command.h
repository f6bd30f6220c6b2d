#pragma once

#include <string>
#include <vector>

namespace acc::launcher {

// `acc-launch rendezvous serve [--host H] [--port P] [--store_compat 1.13|2.1]`: serves the
// TCPStore-compatible store until SIGINT or SIGTERM. `args` are the words after "rendezvous".
// Blocks until a signal; prints one line with the address it listens on. Returns 0 after a
// signal or --help. Throws ConfigError for a bad flag (exit 2, one line naming it) and
// NetworkError when the address is in use or cannot be bound (exit 3, naming host:port).
int run_rendezvous_command(const std::vector<std::string>& args);

}  // namespace acc::launcher
