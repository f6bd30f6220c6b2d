#pragma once

// Connecting to a store that may start after this node (node 0's store of a static job, the c10d
// rendezvous store of an elastic one): short tries until a deadline, the stop check between them.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "acc/rendezvous/clock.h"
#include "acc/rendezvous/store_client.h"

namespace acc::launcher {

// Tries `options` until `deadline` of `clock`'s time, each try connecting for at most `try_bound`
// (and what is left of the wait), `throw_if_stopped` between them, so that SIGINT and SIGTERM end
// the wait within a second. A server that accepts and then closes the connection during the
// handshake is tried again too. At the deadline it throws TimeoutError: where a server accepted and
// did not answer the handshake (options.handshake_timeout), or broke it, its message and "(FLAGS)"
// after it, naming the flags that point at that server; where nothing answered, `not_answered`.
std::unique_ptr<rendezvous::StoreClient> connect_until(
    rendezvous::StoreClientOptions options, const rendezvous::Clock& clock,
    rendezvous::Clock::time_point deadline, std::chrono::milliseconds try_bound,
    const std::function<void()>& throw_if_stopped, const std::string& flags,
    const std::string& not_answered);

}  // namespace acc::launcher
