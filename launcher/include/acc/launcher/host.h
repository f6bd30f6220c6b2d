#pragma once

// Facts about this machine and its sockets: the OS boundary the plan is made against.

#include <string>

#include "acc/launcher/plan.h"

namespace acc::launcher {

// Reads the hostname, online CPUs, NVIDIA GPUs (/proc/driver/nvidia/gpus, without CUDA) and the
// environment. Never throws.
HostInfo detect_host();

// Binds port 0 on all interfaces and returns the port the kernel chose. Throws NetworkError.
int pick_free_port();

// Throws NetworkError naming address and port when a store could not listen there (another
// process has it). SO_REUSEADDR as TCPStore uses it, so a port in TIME_WAIT is not refused.
void ensure_port_free(const std::string& address, int port);

}  // namespace acc::launcher
