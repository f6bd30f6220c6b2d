#include "uring.h"

#include <cerrno>
#include <cstring>

namespace acc::rendezvous::detail {

Uring::Uring(unsigned entries, io_uring_params params) {
  // liburing returns -errno; the ring stays off (ok() false) where the kernel refuses it.
  if (io_uring_queue_init_params(entries, &ring_, &params) < 0) return;
  ok_ = true;
  entries_ = params.sq_entries;
}

Uring::~Uring() {
  close();
}

void Uring::close() {
  if (ok_) io_uring_queue_exit(&ring_);
  ok_ = false;
}

io_uring_sqe& Uring::queue() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // not null: queued() < entries()
  std::memset(sqe, 0, sizeof(*sqe));
  ++queued_;
  return *sqe;
}

long Uring::enter(unsigned wait) {
  int taken;
  do {
    taken = io_uring_submit_and_wait(&ring_, wait);
  } while (taken == -EINTR);
  if (taken < 0) {
    errno = -taken;
    return -1;
  }
  queued_ -= static_cast<unsigned>(taken);
  return taken;
}

}  // namespace acc::rendezvous::detail
