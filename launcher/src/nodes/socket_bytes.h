#pragma once

// Whole buffers over a blocking socket, for the launchers' own links between nodes
// (network_probe.h, agent/checkpoint_replica.h).

#include <cstddef>

namespace acc::launcher {

// All `size` bytes sent (no SIGPIPE); false where the peer broke off or a timeout passed.
bool write_all_bytes(int fd, const char* data, std::size_t size);
// All `size` bytes received; false where the peer closed, broke off or a timeout passed.
bool read_all_bytes(int fd, char* data, std::size_t size);
// The port the socket `fd` is bound to (IPv4 or IPv6).
int bound_port(int fd);
// SO_RCVTIMEO and SO_SNDTIMEO of `seconds`: a peer that stops answering ends a read or a write.
void set_socket_timeouts(int fd, int seconds);

}  // namespace acc::launcher
