#include "acc/launcher/membership.h"

#include "acc/launcher/host.h"

namespace acc::launcher {

Round StaticMembership::join(int restart_count) {
  int port = plan_.master_port;
  if (port == 0) {
    port = pick_free_port();
  } else if (plan_.node_rank == 0) {
    ensure_port_free(plan_.master_addr, port);
  }
  return static_round(plan_, port, restart_count);
}

}  // namespace acc::launcher
