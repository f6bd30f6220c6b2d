#include "nodes/store_connect.h"

#include <algorithm>
#include <optional>

#include "acc/common/error.h"

namespace acc::launcher {

std::unique_ptr<rendezvous::StoreClient> connect_until(
    rendezvous::StoreClientOptions options, const rendezvous::Clock& clock,
    rendezvous::Clock::time_point deadline, std::chrono::milliseconds try_bound,
    const std::function<void()>& throw_if_stopped, const std::string& flags,
    const std::string& not_answered) {
  using std::chrono::milliseconds;
  for (;;) {
    throw_if_stopped();
    const auto left = std::chrono::ceil<milliseconds>(deadline - clock.now());
    options.connect_timeout = std::clamp(left, milliseconds(1), try_bound);
    std::optional<std::string> handshake;
    try {
      return std::make_unique<rendezvous::StoreClient>(options);
    } catch (const rendezvous::StoreHandshakeTimeout& e) {
      handshake = e.what();
    } catch (const rendezvous::StoreHandshakeFailed& e) {
      handshake = e.what();  // a server going away, or not a store: the next try may find ours
    } catch (const TimeoutError&) {
    }
    if (clock.now() < deadline) continue;
    if (handshake) throw TimeoutError(*handshake + " (" + flags + ")");
    throw TimeoutError(not_answered);
  }
}

}  // namespace acc::launcher
