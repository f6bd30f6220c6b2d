#pragma once

// Where the other nodes reach a SLURM node: detect_cluster's `resolve` (acc/launcher/nodes/
// cluster.h) in main.

#include <string>

#include "process/os.h"

namespace acc::launcher {

// `node` if it resolves, else its NodeAddr from `scontrol show node` run through `os` (clusters,
// and SLURM on one machine, where node names are not host names), else the name itself. Blocks
// for the resolver and scontrol.
std::string resolve_slurm_node_address(const std::string& node, Os& os);

}  // namespace acc::launcher
