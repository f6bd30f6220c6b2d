#pragma once

// The small types the plan, the nodes and the agent share: a worker's variables, its stream
// routing, its spec, and this node's place in the job for one attempt. Plain data.

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace acc::launcher {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// Which of a worker's streams a --redirects or --tee spec selects: "3", or "0:1,1:2" per local
// rank.
struct StreamSpec {
  static constexpr int kStdout = 1;
  static constexpr int kStderr = 2;
  int default_mask = 0;
  std::map<int, int> per_local_rank;
  int mask_for(int local_rank) const;
};

struct WorkerSpec {
  int local_rank = 0;
  std::vector<std::string> argv;
  // --virtual-local-rank: the one device this worker sees (CUDA_VISIBLE_DEVICES), its LOCAL_RANK
  // then 0; empty otherwise.
  std::string virtual_device;
};

// This node's place in the job for one attempt: fixed by the flags (static rendezvous) or agreed
// in a rendezvous round. Global ranks follow from it.
struct Round {
  int node_rank = 0;
  int nnodes = 1;
  std::string master_addr;
  int master_port = 0;
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT: failures so far, not re-rendezvous
  bool agent_store = false;  // the launcher serves the workers' store at master_addr:port
  // Where this node's hostname would not bring the other nodes here (store_address.h), the
  // interface of the address it goes by instead: the workers' GLOO_SOCKET_IFNAME unless they
  // have one, since Gloo otherwise takes its own address from the hostname. Empty: none set.
  std::string socket_interface;
};

}  // namespace acc::launcher
