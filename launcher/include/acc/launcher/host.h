#pragma once

// Facts about this machine and its sockets: the OS boundary the plan is made against. Every
// command reads the machine through detect_host(), so tests can give it a fake /proc and /sys.

#include <string>
#include <vector>

#include "acc/launcher/plan.h"

namespace acc::launcher {

// The directory the host facts are read under: $ACC_HOST_ROOT (a fake root with proc/ and sys/
// for tests and containers), else "/".
std::string host_root();

// Reads the hostname, CPUs (online, physical cores), GPUs (NVIDIA through
// /proc/driver/nvidia/gpus or /dev/nvidiaN, AMD through /dev/kfd and the KFD topology, Intel
// through DRM render nodes; none needs a driver library), memory, the current directory and the
// environment. Files are read under `root`; the environment is this process's. Never throws.
HostInfo detect_host(const std::string& root);
inline HostInfo detect_host() {
  return detect_host(host_root());
}

// How many of `devices` (in index order, each with its ids: "0", a UUID) a visibility variable
// such as CUDA_VISIBLE_DEVICES leaves, as PyTorch parses it: a comma list of indices or (a
// prefix of) UUIDs, read up to the first entry that names no device, is negative or repeats one.
// An empty value hides every device. Pure.
int count_visible(const std::vector<std::vector<std::string>>& devices, const std::string& value);

// Binds port 0 on all interfaces and returns the port the kernel chose. Throws NetworkError.
int pick_free_port();

// Throws NetworkError naming address and port when a store could not listen there (another
// process has it). SO_REUSEADDR as TCPStore uses it, so a port in TIME_WAIT is not refused.
void ensure_port_free(const std::string& address, int port);

}  // namespace acc::launcher
