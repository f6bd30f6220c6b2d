#include "send_ring.h"

#include <sys/socket.h>

#include <cstring>

namespace acc::rendezvous::detail {

void SendRing::send(int fd, const char* data, std::size_t size, std::uint64_t tag) {
  io_uring_sqe& sqe = ring_.queue();
  sqe.opcode = IORING_OP_SEND;
  sqe.fd = fd;
  sqe.addr = reinterpret_cast<std::uint64_t>(data);
  sqe.len = static_cast<std::uint32_t>(size > 0x7fffffff ? 0x7fffffff : size);
  // MSG_DONTWAIT: a full socket completes with -EAGAIN instead of parking the send in the ring.
  sqe.msg_flags = MSG_NOSIGNAL | MSG_DONTWAIT;
  sqe.user_data = tag;
}

bool SendRing::submit_and_wait() {
  const unsigned count = ring_.queued();
  const long taken = ring_.enter(count);
  // Fewer taken than queued would leave stale submissions in the ring: the ring is closed then.
  return taken == static_cast<long>(count);
}

}  // namespace acc::rendezvous::detail
