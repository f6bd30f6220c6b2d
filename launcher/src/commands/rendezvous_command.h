#pragma once

namespace acc::launcher {

// `acc-launch rendezvous serve [--host H] [--port P] [--store-compat 1.13|2.1]`: serves the
// TCPStore-compatible store until SIGINT or SIGTERM. argv[0] is "rendezvous". Blocks until a
// signal; prints one line with the address it listens on. Returns the exit code: 0 after a
// signal or --help, 2 for a bad flag (one line naming it), 3 when the address is in use or
// cannot be bound (one line naming host:port). Does not throw.
int run_rendezvous_command(int argc, char** argv);

}  // namespace acc::launcher
