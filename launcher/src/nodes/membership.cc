#include "acc/launcher/nodes/membership.h"

#include "acc/common/endpoint.h"
#include "acc/rendezvous/store_server.h"

namespace acc::launcher {

StaticMembership::StaticMembership(const LaunchPlan& plan) : plan_(plan) {}
StaticMembership::~StaticMembership() = default;

Round StaticMembership::join(int restart_count) {
  if (plan_.node_rank == 0 && !store_) {
    rendezvous::StoreServerOptions options;
    options.port = plan_.master_port;
    // Workers reach the store at MASTER_ADDR: an IPv6 one needs a listener on IPv6 too.
    if (is_ipv6_literal(plan_.master_addr)) options.host = "::";
    options.log = [](std::string_view) {};  // a worker's broken connection is its own report
    store_ = std::make_unique<rendezvous::StoreServer>(options);
    store_->start();
  }
  Round round = static_round(plan_, store_ ? store_->port() : plan_.master_port, restart_count);
  round.agent_store = true;
  return round;
}

}  // namespace acc::launcher
